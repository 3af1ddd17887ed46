// Reads a canvases shard's tensors directly: the ground truth is not part of training's
// ShardData, and the judge pads only the captions it scores.
#include "canvas_shard.h"

#include <torch/torch.h>

#include "file_io.h"
#include "safetensors.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "zstd_codec.h"

namespace tessera::bench {
namespace {

common::Result<torch::Tensor> tensor_of(common::TorchTensorMap& map, const std::string& name, std::int64_t rank) {
    auto found = map.find(name);
    if (found == map.end()) return common::make_error("not a captioned canvases shard: no `" + name + "` tensor");
    if (found->second.dim() != rank)
        return common::make_error("`" + name + "` has rank " + std::to_string(found->second.dim()) + ", expected " +
                                  std::to_string(rank));
    return found->second;
}

}  // namespace

common::Result<CanvasShard> load_canvas_shard(const std::filesystem::path& path, std::int64_t max_rows) {
    auto bytes = common::read_file(path, common::kMaxShardBytes);
    if (!bytes) return bytes.error();
    if (common::is_zstd_frame(*bytes)) {
        auto raw = common::zstd_decompress(*bytes, common::kMaxShardBytes);
        if (!raw) return common::with_context(path.filename().string(), raw.error());
        bytes = std::move(raw);
    }
    auto file = common::parse_safetensors(*bytes);
    if (!file) return common::with_context(path.filename().string(), file.error());
    auto map = common::to_torch_map(*file);
    if (!map) return map.error();
    try {
        auto latents = tensor_of(*map, "latents", 4), tokens = tensor_of(*map, "text_tokens", 2),
             lengths = tensor_of(*map, "text_len", 1), slots = tensor_of(*map, "slot_classes", 2),
             relation = tensor_of(*map, "relation", 1), attributes = tensor_of(*map, "attributes", 2),
             quadrants = tensor_of(*map, "quadrants", 2);
        for (const auto* t : {&latents, &tokens, &lengths, &slots, &relation, &attributes, &quadrants})
            if (!*t) return t->error();
        auto n = latents->size(0);
        if (lengths->size(0) != n || slots->size(0) != n || relation->size(0) != n ||
            attributes->size(0) != n || quadrants->size(0) != n)
            return common::make_error(path.filename().string() + ": its tensors count different canvases");
        if (lengths->sum().item<std::int64_t>() != tokens->size(0) || lengths->min().item<std::int64_t>() < 1)
            return common::make_error(path.filename().string() + ": `text_len` does not count `text_tokens`");
        auto rows = max_rows > 0 ? std::min(max_rows, n) : n;
        CanvasShard shard;
        shard.latents = latents->slice(0, 0, rows).to(torch::kFloat32);
        shard.text_len = lengths->slice(0, 0, rows).to(torch::kInt64).contiguous();
        auto starts = torch::cumsum(*lengths, 0) - *lengths;
        auto longest = shard.text_len.max().item<std::int64_t>();
        shard.text = torch::zeros({rows, longest, tokens->size(1)}, torch::kFloat32);
        auto slot = slots->to(torch::kInt64), rel = relation->to(torch::kInt64), attr = attributes->to(torch::kInt64),
             where = quadrants->to(torch::kInt64);
        for (std::int64_t i = 0; i < rows; ++i) {
            auto start = starts[i].item<std::int64_t>(), len = shard.text_len[i].item<std::int64_t>();
            shard.text[i].slice(0, 0, len).copy_(tokens->slice(0, start, start + len));
            CaptionTruth truth;
            truth.classes = {slot[i][0].item<std::int64_t>(), slot[i][1].item<std::int64_t>()};
            truth.relation = rel[i].item<std::int64_t>();
            truth.attributes = {attr[i][0].item<std::int64_t>(), attr[i][1].item<std::int64_t>()};
            shard.truth.push_back(truth);
            shard.quadrants.push_back({where[i][0].item<std::int64_t>(), where[i][1].item<std::int64_t>()});
        }
        return shard;
    } catch (const c10::Error& error) {
        return common::make_error(path.filename().string() + ": " + error.what_without_backtrace());
    }
}

}  // namespace tessera::bench
