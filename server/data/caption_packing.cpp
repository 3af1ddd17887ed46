// Packing captions: the tokens inside each caption's length, in sample order, as f16.
#include "caption_packing.h"

#include <torch/torch.h>

#include "caption_tensors.h"
#include "safetensors.h"

namespace tessera::data {
namespace {

// The shard's caption tokens (in sample order, as load_shard packs them) as f16.
common::Result<torch::Tensor> f16_tokens(const torch::Tensor& tokens) {
    auto f16 = tokens.to(torch::kFloat16).contiguous();
    // load_shard refused non-finite embeddings, so anything non-finite now overflowed f16.
    if (!torch::isfinite(f16).all().item<bool>())
        return common::make_error("caption embeddings hold values past float16's range (|x| > 65504)");
    return f16;
}

common::ByteView bytes_of(const torch::Tensor& t) {
    return {static_cast<const std::uint8_t*>(t.data_ptr()), static_cast<std::size_t>(t.nbytes())};
}

}  // namespace

common::Result<common::Bytes> pack_captions(common::ByteView raw, const common::ShardData& shard) {
    auto file = common::parse_safetensors(raw);
    if (!file) return file.error();
    try {
        auto tokens = f16_tokens(shard.text_tokens);
        if (!tokens) return tokens.error();
        auto lengths = shard.text_len.to(torch::kInt64).contiguous();
        std::vector<common::TensorView> views;
        for (const auto& t : file->tensors())
            if (!is_caption_tensor(t.name) || t.name == "captions") views.push_back(t);
        views.push_back({"text_tokens", common::DType::F16, {tokens->size(0), tokens->size(1)}, bytes_of(*tokens)});
        views.push_back({"text_len", common::DType::I64, {lengths.size(0)}, bytes_of(lengths)});
        return common::write_safetensors(views, file->metadata());
    } catch (const c10::Error& error) {
        return common::make_error(std::string("packing captions: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::data
