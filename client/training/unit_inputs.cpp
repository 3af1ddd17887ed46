// A unit's inputs read from the cache (unit_inputs.h).
#include "unit_inputs.h"

#include "file_io.h"
#include "safetensors.h"

namespace tessera::client {

common::Result<common::TorchTensorMap> read_base_model(const std::filesystem::path& model_file) {
    auto model_bytes = common::read_file(model_file, common::kMaxModelBytes);
    if (!model_bytes) return model_bytes.error();
    auto model = common::parse_safetensors(*model_bytes);
    if (!model) return common::with_context("base model", model.error());
    return common::to_torch_map(*model);
}

common::Result<common::ShardData> read_shards(const std::vector<std::filesystem::path>& shard_files) {
    std::vector<common::ShardData> shards;
    for (const auto& file : shard_files) {
        auto shard = common::load_shard_file(file);
        if (!shard) return common::with_context(file.filename().string(), shard.error());
        shards.push_back(std::move(*shard));
    }
    return common::concat_shards(shards);
}

}  // namespace tessera::client
