// The judges' classifier: the cnn preset fitted to labelled 28×28 images and cached as a
// safetensors file stamped with the recipe that made it, so a cache made any other way (or
// from other images) is trained again. Shared by SampleJudge and CaptionJudge.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <functional>
#include <string>

#include "result.h"
#include "torch/models/cnn.h"
#include "torch/shard_data.h"

namespace tessera::bench {

struct JudgeCnnRecipe {
    std::int64_t epochs = 10;
    std::uint64_t seed = 1;
    std::string data;  // what the images were (e.g. their shards' hashes): part of the recipe
};

// The recipe as the cache's metadata records it.
std::string judge_cnn_recipe(const JudgeCnnRecipe& recipe);

// The images a judge learns from: standardised 1×28×28 inputs, labels < 10.
using JudgeImages = std::function<common::Result<common::ShardData>()>;

// Loads `cnn` from `cache` when it exists, was made by `recipe` and loads; else fits the cnn
// preset's seeded initial weights to the images `load` gives (called only then) and writes
// the cache. `what` names the judge in the progress line (nothing with `quiet`).
common::Status load_or_fit_judge_cnn(common::Cnn& cnn, const JudgeImages& load, const JudgeCnnRecipe& recipe,
                                     const std::filesystem::path& cache, const std::string& what, bool quiet);

// Images (B, 1, S, S) in [-1, 1] → the cnn's inputs: the centre 28×28 crop, clamped and
// standardised as load_shard standardises real pixels.
torch::Tensor judge_input(const torch::Tensor& images);

}  // namespace tessera::bench
