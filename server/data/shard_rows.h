// Picks samples out of a shard's tensors and joins them again, whatever the shard holds:
// every tensor with one row per sample is indexed, and packed caption tokens (`text_tokens`
// with `text_len`, docs/dataset_format.md "Captions") are cut caption by caption.
#pragma once

#include <filesystem>

#include "result.h"
#include "torch/tensor_convert.h"

namespace tessera::data {

// A shard file (safetensors, plain or zstd) as its tensors, named as stored.
common::Result<common::TorchTensorMap> read_shard_tensors(const std::filesystem::path& path);

// The number of samples a shard's tensors describe (the rows of `labels`).
common::Result<std::int64_t> sample_count(const common::TorchTensorMap& shard);

// The samples at `rows` (i64 indices, in that order). Fails on a tensor that is neither
// per-sample nor the packed caption tokens.
common::Result<common::TorchTensorMap> select_rows(const common::TorchTensorMap& shard, const torch::Tensor& rows);

// Shards of the same tensors, one after the other.
common::Result<common::TorchTensorMap> join_shards(const std::vector<common::TorchTensorMap>& shards);

}  // namespace tessera::data
