// A captioned-canvases shard as the caption judge reads it: the stored latents, the captions
// padded for sampling, and the ground truth `load_shard` ignores (slot_classes, relation,
// attributes, quadrants; docs/dataset_format.md, "prepare canvases").
#pragma once

#include <torch/types.h>

#include <array>
#include <filesystem>
#include <vector>

#include "prompt_fidelity.h"
#include "result.h"

namespace tessera::bench {

struct CanvasShard {
    torch::Tensor latents;   // f32 (N, C, S, S), × the dataset's scale factor as stored
    torch::Tensor text;      // f32 (N, L, D): each caption's tokens, zero-padded to the longest
    torch::Tensor text_len;  // i64 (N)
    std::vector<CaptionTruth> truth;
    std::vector<std::array<std::int64_t, 2>> quadrants;  // where A and B are drawn

    std::int64_t size() const { return static_cast<std::int64_t>(truth.size()); }
};

// The first `max_rows` canvases of a shard file (≤ 0: all). Refuses a shard without the
// canvases' ground truth or packed captions (`text_tokens` + `text_len`), naming the tensor.
common::Result<CanvasShard> load_canvas_shard(const std::filesystem::path& path, std::int64_t max_rows = 0);

}  // namespace tessera::bench
