// A unit's inputs as the runners read them from the blob cache: the base model (safetensors)
// and its shards, concatenated in the unit's order.
#pragma once

#include <filesystem>
#include <vector>

#include "result.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"

namespace tessera::client {

common::Result<common::TorchTensorMap> read_base_model(const std::filesystem::path& model_file);
common::Result<common::ShardData> read_shards(const std::vector<std::filesystem::path>& shard_files);

}  // namespace tessera::client
