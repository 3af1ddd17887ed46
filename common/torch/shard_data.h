// Training data from shard files: a safetensors file (optionally zstd-compressed) holding
// `labels` (I64 [N]) and either `latents` (F16/BF16/F32 [N,C,H,W]) or `pixels` (U8
// [N,C,H,W]), plus optional captions: `text_emb` (float [N,L,D], padded) with `text_len`
// (I64 [N]) or `text_mask` ([N,L], a prefix of ones), or only the captions' tokens,
// `text_tokens` (float [T,D]) with `text_len` summing to T. See docs/dataset_format.md.
#pragma once

#include <torch/types.h>

#include <filesystem>

#include "../bytes.h"
#include "../dataset_manifest.h"
#include "../result.h"

namespace tessera::common {

// Decompressed shards are capped at this size; a larger claim is refused.
constexpr std::uint64_t kMaxShardBytes = std::uint64_t{2} << 30;

struct ShardData {
    torch::Tensor inputs;    // f32 (N, C, H, W); pixels are standardised
    torch::Tensor labels;    // i64 (N)
    torch::Tensor text_emb;  // f32 (N, L, D) captions padded to the longest, or undefined
    torch::Tensor text_len;  // i64 (N) tokens of each caption, in [1, L]; defined with text_emb
    bool pixels = false;     // true when the shard held `pixels`, not `latents`

    std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
};

// Pixels in [0, 1] → the classifier's standardised inputs (as load_shard gives them).
torch::Tensor standardise_pixels(const torch::Tensor& unit_pixels);

// Parses shard bytes (zstd frames are recognised by their magic number).
Result<ShardData> load_shard(ByteView bytes);
Result<ShardData> load_shard_file(const std::filesystem::path& path);

// Concatenates shards of the same sample shape (captions padded to the longest).
Result<ShardData> concat_shards(const std::vector<ShardData>& shards);

// Every training shard a dataset lists (files relative to `dir`), loaded and concatenated.
Result<ShardData> load_training_set(const std::filesystem::path& dir, const DatasetManifest& manifest);

}  // namespace tessera::common
