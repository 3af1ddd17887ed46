// Row selection over a shard's tensors.
#include "shard_rows.h"

#include <torch/torch.h>

#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "zstd_codec.h"

namespace tessera::data {

common::Result<common::TorchTensorMap> read_shard_tensors(const std::filesystem::path& path) {
    auto bytes = common::read_file(path, common::kMaxShardBytes);
    if (!bytes) return common::with_context(path.string(), bytes.error());
    if (common::is_zstd_frame(*bytes)) {
        auto raw = common::zstd_decompress(*bytes, common::kMaxShardBytes);
        if (!raw) return common::with_context(path.string(), raw.error());
        *bytes = std::move(raw).value();
    }
    auto file = common::parse_safetensors(*bytes);
    if (!file) return common::with_context(path.string(), file.error());
    auto tensors = common::to_torch_map(*file);
    if (!tensors) return common::with_context(path.string(), tensors.error());
    return tensors;
}

common::Result<std::int64_t> sample_count(const common::TorchTensorMap& shard) {
    auto labels = shard.find("labels");
    if (labels == shard.end() || labels->second.dim() != 1) return common::make_error("the shard has no labels [N]");
    return labels->second.size(0);
}

common::Result<common::TorchTensorMap> select_rows(const common::TorchTensorMap& shard, const torch::Tensor& rows) {
    auto samples = sample_count(shard);
    if (!samples) return samples.error();
    common::TorchTensorMap picked;
    for (const auto& [name, tensor] : shard) {
        if (name == "text_tokens") {
            auto len = shard.find("text_len");
            if (len == shard.end()) return common::make_error("text_tokens without text_len");
            auto lengths = len->second.to(torch::kInt64).contiguous();
            auto starts = (lengths.cumsum(0) - lengths).contiguous();
            auto length = lengths.accessor<std::int64_t, 1>();
            auto start = starts.accessor<std::int64_t, 1>();
            std::vector<torch::Tensor> captions;
            auto wanted = rows.contiguous();
            auto row = wanted.accessor<std::int64_t, 1>();
            for (std::int64_t k = 0; k < wanted.size(0); ++k)
                captions.push_back(tensor.slice(0, start[row[k]], start[row[k]] + length[row[k]]));
            picked[name] = captions.empty() ? tensor.slice(0, 0, 0) : torch::cat(captions);
        } else if (tensor.dim() >= 1 && tensor.size(0) == *samples) {
            picked[name] = tensor.index_select(0, rows);
        } else {
            return common::make_error("shard tensor \"" + name + "\" has no row per sample");
        }
    }
    return picked;
}

common::Result<common::TorchTensorMap> join_shards(const std::vector<common::TorchTensorMap>& shards) {
    if (shards.empty()) return common::make_error("no shards to join");
    common::TorchTensorMap joined;
    for (const auto& [name, first] : shards.front()) {
        std::vector<torch::Tensor> parts;
        for (const auto& shard : shards) {
            auto found = shard.find(name);
            if (found == shard.end() || found->second.scalar_type() != first.scalar_type() ||
                found->second.sizes().slice(1) != first.sizes().slice(1))
                return common::make_error("shards differ in tensor \"" + name + "\"");
            parts.push_back(found->second);
        }
        joined[name] = torch::cat(parts);
    }
    for (const auto& shard : shards)
        if (shard.size() != joined.size()) return common::make_error("shards hold different tensors");
    return joined;
}

}  // namespace tessera::data
