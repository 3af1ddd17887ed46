// The judges' cached cnn: fitted once with a fixed recipe, reused while the recipe holds.
#include "judge_cnn.h"

#include <torch/torch.h>

#include <iostream>

#include "bytes.h"
#include "file_io.h"
#include "safetensors.h"
#include "torch/model_state.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/workload.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kJudgeBatch = 64;
constexpr double kJudgeLr = 1e-3;
constexpr double kJudgeWeightDecay = 0.01;
constexpr std::int64_t kJudgeClasses = 10;  // the cnn preset's outputs
constexpr const char* kRecipeKey = "judge_recipe";

// The cached judge, when it exists, was made by `recipe` and loads.
bool load_cached(torch::nn::Module& cnn, const std::filesystem::path& cache, const std::string& recipe) {
    if (!std::filesystem::exists(cache)) return false;
    auto bytes = common::read_file(cache, 64 * common::kMiB);
    if (!bytes) return false;
    auto file = common::parse_safetensors(*bytes);
    if (!file) return false;
    auto made_by = file->metadata().find(kRecipeKey);
    if (made_by == file->metadata().end() || made_by->second != recipe) return false;
    auto state = common::to_torch_map(*file);
    return state && common::load_state(cnn, *state);
}

}  // namespace

std::string judge_cnn_recipe(const JudgeCnnRecipe& recipe) {
    return "cnn epochs=" + std::to_string(recipe.epochs) + " batch=" + std::to_string(kJudgeBatch) +
           " lr=" + std::to_string(kJudgeLr) + " wd=" + std::to_string(kJudgeWeightDecay) +
           " seed=" + std::to_string(recipe.seed) + " train=" + recipe.data;
}

common::Status load_or_fit_judge_cnn(common::Cnn& cnn, const JudgeImages& load, const JudgeCnnRecipe& recipe,
                                     const std::filesystem::path& cache, const std::string& what, bool quiet) {
    auto stamp = judge_cnn_recipe(recipe);
    if (load_cached(*cnn, cache, stamp)) {
        if (!quiet) std::cerr << what << ": reusing " << cache.string() << "\n";
        return {};
    }
    auto data = load();
    if (!data) return data.error();
    torch::AutoGradMode training(true);
    common::DataShape shape;
    shape.channels = 1;
    shape.size = common::CnnImpl::kImageSide;
    shape.num_classes = kJudgeClasses;
    auto workload = common::make_workload("cnn", shape, recipe.seed);
    if (!workload) return workload.error();
    common::TrainConfig train;
    train.batch_size = kJudgeBatch;
    train.steps = std::max<std::int64_t>(1, recipe.epochs * data->size() / train.batch_size);
    train.lr = kJudgeLr;
    train.weight_decay = kJudgeWeightDecay;
    train.seed = recipe.seed;
    train.num_classes = kJudgeClasses;
    if (!quiet)
        std::cerr << what << ": training the cnn on " << data->size() << " images for " << recipe.epochs
                  << " epochs\n";
    auto theta0 = common::state_of(*(*workload)->module());
    auto outcome = common::train("cnn", theta0, *data, train);
    if (!outcome) return outcome.error();
    common::TorchTensorMap trained;
    for (const auto& [name, value] : theta0) trained.emplace(name, value + outcome->delta.at(name));
    if (auto status = common::load_state(*cnn, trained); !status) return status;
    auto bytes = common::to_safetensors(trained, {{kRecipeKey, stamp}});
    if (!bytes) return bytes.error();
    return common::write_file_atomic(cache, *bytes);
}

torch::Tensor judge_input(const torch::Tensor& images) {
    auto side = common::CnnImpl::kImageSide;
    auto margin = (images.size(2) - side) / 2;
    auto crop = images.slice(2, margin, margin + side).slice(3, margin, margin + side);
    return common::standardise_pixels((crop.clamp(-1, 1) + 1) / 2);
}

}  // namespace tessera::bench
