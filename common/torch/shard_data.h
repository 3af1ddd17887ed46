// Training data from shard files: a safetensors file (optionally zstd-compressed) holding
// `labels` (I64 [N]) and either `latents` (F16/BF16/F32 [N,C,H,W]) or `pixels` (U8
// [N,C,H,W]), plus optional captions: `text_emb` (float [N,L,D], padded) with `text_len`
// (I64 [N]) or `text_mask` ([N,L], a prefix of ones), or only the captions' tokens,
// `text_tokens` (float [T,D]) with `text_len` summing to T. See docs/dataset_format.md.
// Captions are held packed in the shard's own float type and padded a batch at a time: at
// T5-XXL width (300 tokens × 4096) a padded f32 copy would take 4.9 MB a sample.
#pragma once

#include <torch/types.h>

#include <filesystem>

#include "../bytes.h"
#include "../dataset_manifest.h"
#include "../result.h"

namespace tessera::common {

// A batch's captions: (B, L, D) padded with zeros to the batch's longest, and each one's
// length (B,) i64.
struct PaddedCaptions {
    torch::Tensor text;
    torch::Tensor len;
};

struct ShardData {
    torch::Tensor inputs;  // f32 (N, C, H, W); pixels are standardised
    torch::Tensor labels;  // i64 (N)
    // Captions, or all three undefined: the tokens (T, D) in the shard's float type (F16, BF16
    // or F32), and each sample's first row in them and token count, i64 (N), count ≥ 1.
    torch::Tensor text_tokens;
    torch::Tensor text_start;
    torch::Tensor text_len;
    bool pixels = false;  // true when the shard held `pixels`, not `latents`

    std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
    bool has_captions() const { return text_tokens.defined(); }
    std::int64_t text_dim() const { return has_captions() ? text_tokens.size(1) : 0; }

    // The samples at `rows` (i64 indices) or in [begin, end); the caption tokens are shared.
    ShardData rows(const torch::Tensor& index) const;
    ShardData slice(std::int64_t begin, std::int64_t end) const;
    // Every sample's caption, padded (none: both undefined).
    PaddedCaptions padded_captions() const;
};

// The captions of samples `rows` (i64 indices, on the tokens' device), padded as above in the
// tokens' float type.
PaddedCaptions pad_captions(const torch::Tensor& tokens, const torch::Tensor& start, const torch::Tensor& len,
                            const torch::Tensor& rows);

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
