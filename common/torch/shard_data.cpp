// Shard loading with the checks a file from elsewhere needs: names, dtypes, ranks, counts.
#include "shard_data.h"

#include <torch/torch.h>

#include "../file_io.h"
#include "../safetensors.h"
#include "../zstd_codec.h"
#include "tensor_convert.h"

namespace tessera::common {
namespace {

// Fashion-MNIST pixel statistics; the classifier sees standardised inputs.
constexpr double kPixelMean = 0.2860;
constexpr double kPixelStd = 0.3530;

bool is_float(DType dtype) { return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16; }

// Each caption's first row when they are packed back to back in sample order.
torch::Tensor starts_of(const torch::Tensor& lengths) { return lengths.cumsum(0) - lengths; }

// Caption lengths from a mask [N, L] of 0/1 (any integer or bool dtype): each row must be
// ones then zeros, with at least one one.
Result<torch::Tensor> lengths_from_mask(const TensorView& mask, std::int64_t n, std::int64_t tokens) {
    if (mask.shape.size() != 2 || mask.shape[0] != n || mask.shape[1] != tokens)
        return make_error("shard \"text_mask\" must have shape [N, L] like \"text_emb\"'s first two");
    if (is_float(mask.dtype)) return make_error("shard \"text_mask\" must be an integer or bool tensor");
    auto tensor = to_torch(mask);
    if (!tensor) return tensor.error();
    auto ones = tensor->eq(1);
    if (!ones.logical_or(tensor->eq(0)).all().item<bool>()) return make_error("shard \"text_mask\" holds values other than 0 and 1");
    auto len = ones.sum(1).to(torch::kInt64);
    auto prefix = torch::arange(tokens, torch::kInt64).unsqueeze(0).lt(len.unsqueeze(1));
    if (!prefix.eq(ones).all().item<bool>())
        return make_error("shard \"text_mask\" has a row that is not ones followed by zeros");
    if (len.min().item<std::int64_t>() < 1) return make_error("shard \"text_mask\" has a caption of no tokens");
    return len;
}

// The captions of a shard of `n` samples: padded `text_emb` [N, L, D] with `text_len` [N] or
// `text_mask` [N, L] (or neither: every token counts), or packed `text_tokens` [T, D] with
// `text_len`. Fills the shard's captions, packed in the file's float type; named errors for
// anything else.
Status parse_captions(const TensorFile& file, std::int64_t n, ShardData& shard) {
    const auto* padded = file.find("text_emb");
    const auto* packed = file.find("text_tokens");
    const auto* lengths = file.find("text_len");
    const auto* mask = file.find("text_mask");
    if (padded == nullptr && packed == nullptr) {
        if (lengths != nullptr || mask != nullptr)
            return make_error("shard has caption lengths or a mask but no \"text_emb\" or \"text_tokens\"");
        return {};
    }
    if (padded != nullptr && packed != nullptr) return make_error("shard holds both \"text_emb\" and \"text_tokens\"");
    if (lengths != nullptr && mask != nullptr) return make_error("shard holds both \"text_len\" and \"text_mask\"");
    torch::Tensor len;
    if (lengths != nullptr) {
        if (lengths->dtype != DType::I64 || lengths->shape.size() != 1 || lengths->shape[0] != n)
            return make_error("shard \"text_len\" must be I64 of shape [N] (N = " + std::to_string(n) + ")");
        auto tensor = to_torch(*lengths);
        if (!tensor) return tensor.error();
        len = std::move(tensor).value();
        if (len.min().item<std::int64_t>() < 1) return make_error("shard \"text_len\" has a caption of no tokens");
    }
    if (packed != nullptr) {
        if (!is_float(packed->dtype) || packed->shape.size() != 2)
            return make_error("shard \"text_tokens\" must be float of shape [T, D]");
        if (!len.defined()) return make_error("shard \"text_tokens\" needs \"text_len\" (each caption's tokens)");
        auto total = len.sum().item<std::int64_t>();
        if (total != packed->shape[0])
            return make_error("shard \"text_len\" sums to " + std::to_string(total) + " tokens but \"text_tokens\" has " +
                              std::to_string(packed->shape[0]));
        auto tokens = to_torch(*packed);
        if (!tokens) return tokens.error();
        shard.text_tokens = std::move(tokens).value();
        shard.text_len = len;
    } else {
        if (!is_float(padded->dtype) || padded->shape.size() != 3 || padded->shape[0] != n)
            return make_error("shard \"text_emb\" must be float of shape [N, L, D] (N = " + std::to_string(n) + ")");
        auto tokens = to_torch(*padded);
        if (!tokens) return tokens.error();
        auto l = padded->shape[1];
        if (l < 1) return make_error("shard \"text_emb\" has captions of no tokens");
        if (mask != nullptr) {
            auto from_mask = lengths_from_mask(*mask, n, l);
            if (!from_mask) return from_mask.error();
            len = std::move(from_mask).value();
        }
        if (len.defined() && len.max().item<std::int64_t>() > l)
            return make_error("shard \"text_len\" is longer than \"text_emb\"'s " + std::to_string(l) + " tokens");
        if (!len.defined()) len = torch::full({n}, l, torch::kInt64);
        auto keep = torch::arange(l, torch::kInt64).unsqueeze(0).lt(len.unsqueeze(1));
        shard.text_tokens = tokens->index({keep});  // the padding dropped, in sample order
        shard.text_len = len;
    }
    shard.text_start = starts_of(shard.text_len);
    if (!torch::isfinite(shard.text_tokens).all().item<bool>())
        return make_error("shard caption embeddings hold non-finite values");
    return {};
}

Result<ShardData> parse_shard(ByteView bytes) {
    auto file = parse_safetensors(bytes);
    if (!file) return file.error();
    const auto* labels = file->find("labels");
    const auto* latents = file->find("latents");
    const auto* pixels = file->find("pixels");
    if (labels == nullptr) return make_error("shard has no \"labels\" tensor");
    if (labels->dtype != DType::I64 || labels->shape.size() != 1)
        return make_error("shard \"labels\" must be I64 of shape [N]");
    if ((latents == nullptr) == (pixels == nullptr))
        return make_error("shard must hold exactly one of \"latents\" and \"pixels\"");
    const auto* inputs = latents != nullptr ? latents : pixels;
    if (inputs->shape.size() != 4) return make_error("shard \"" + inputs->name + "\" must have shape [N, C, H, W]");
    if (latents != nullptr && !is_float(latents->dtype))
        return make_error("shard \"latents\" must be F16, BF16 or F32");
    if (pixels != nullptr && pixels->dtype != DType::U8) return make_error("shard \"pixels\" must be U8");
    auto n = labels->shape[0];
    if (inputs->shape[0] != n)
        return make_error("shard has " + std::to_string(inputs->shape[0]) + " inputs but " + std::to_string(n) +
                          " labels");
    if (n == 0) return make_error("shard holds no samples");

    ShardData shard;
    auto labels_tensor = to_torch(*labels);
    auto inputs_tensor = to_torch(*inputs);
    if (!labels_tensor) return labels_tensor.error();
    if (!inputs_tensor) return inputs_tensor.error();
    shard.labels = std::move(labels_tensor).value();
    if (shard.labels.min().item<std::int64_t>() < 0) return make_error("shard has a negative label");
    shard.pixels = pixels != nullptr;
    shard.inputs = shard.pixels ? standardise_pixels(inputs_tensor->to(torch::kFloat32) / 255.0)
                                : inputs_tensor->to(torch::kFloat32);
    if (!torch::isfinite(shard.inputs).all().item<bool>()) return make_error("shard inputs hold non-finite values");
    if (auto captions = parse_captions(*file, n, shard); !captions) return captions.error();
    return shard;
}

// Each caption's own tokens in sample order (a shard made by rows() shares all of its source's).
torch::Tensor own_tokens(const ShardData& shard) {
    auto offsets = torch::arange(shard.text_len.sum().item<std::int64_t>(), torch::kInt64) -
                   torch::repeat_interleave(starts_of(shard.text_len), shard.text_len);
    return shard.text_tokens.index_select(0, torch::repeat_interleave(shard.text_start, shard.text_len) + offsets);
}

}  // namespace

torch::Tensor standardise_pixels(const torch::Tensor& unit_pixels) { return (unit_pixels - kPixelMean) / kPixelStd; }

PaddedCaptions pad_captions(const torch::Tensor& tokens, const torch::Tensor& start, const torch::Tensor& len,
                            const torch::Tensor& rows) {
    auto lengths = len.index_select(0, rows);
    auto longest = lengths.numel() > 0 ? lengths.max().item<std::int64_t>() : 1;
    auto position = torch::arange(longest, lengths.options()).unsqueeze(0);
    auto inside = position.lt(lengths.unsqueeze(1));  // (B, L)
    // Rows past a caption's end read its last token, then are zeroed.
    auto index = start.index_select(0, rows).unsqueeze(1) + torch::minimum(position, lengths.unsqueeze(1) - 1);
    auto text = tokens.index_select(0, index.flatten()).view({rows.size(0), longest, tokens.size(1)});
    return {text * inside.unsqueeze(2).to(text.dtype()), lengths};
}

ShardData ShardData::rows(const torch::Tensor& index) const {
    ShardData chosen;
    chosen.inputs = inputs.index_select(0, index);
    chosen.labels = labels.index_select(0, index);
    chosen.pixels = pixels;
    if (has_captions()) {
        chosen.text_tokens = text_tokens;
        chosen.text_start = text_start.index_select(0, index);
        chosen.text_len = text_len.index_select(0, index);
    }
    return chosen;
}

ShardData ShardData::slice(std::int64_t begin, std::int64_t end) const {
    return rows(torch::arange(begin, end, torch::kInt64));
}

PaddedCaptions ShardData::padded_captions() const {
    if (!has_captions()) return {};
    return pad_captions(text_tokens, text_start, text_len, torch::arange(size(), text_len.options()));
}

Result<ShardData> load_shard(ByteView bytes) {
    try {
        if (!is_zstd_frame(bytes)) return parse_shard(bytes);
        auto raw = zstd_decompress(bytes, kMaxShardBytes);
        if (!raw) return raw.error();
        return parse_shard(*raw);
    } catch (const c10::Error& error) {
        return make_error(std::string("shard: ") + error.what_without_backtrace());
    }
}

Result<ShardData> load_shard_file(const std::filesystem::path& path) {
    auto bytes = read_file(path, kMaxShardBytes);
    if (!bytes) return bytes.error();
    auto shard = load_shard(*bytes);
    if (!shard) return with_context(path.string(), shard.error());
    return shard;
}

Result<ShardData> concat_shards(const std::vector<ShardData>& shards) {
    if (shards.empty()) return make_error("no shards to train on");
    std::vector<torch::Tensor> inputs, labels, tokens, lengths;
    for (const auto& shard : shards) {
        if (shard.inputs.sizes().slice(1) != shards[0].inputs.sizes().slice(1) || shard.pixels != shards[0].pixels)
            return make_error("shards differ in sample shape or kind");
        if (shard.has_captions() != shards[0].has_captions())
            return make_error("some shards have captions and some do not");
        if (shard.text_dim() != shards[0].text_dim()) return make_error("shards differ in caption width");
        inputs.push_back(shard.inputs);
        labels.push_back(shard.labels);
        if (shard.has_captions()) {
            tokens.push_back(own_tokens(shard));
            lengths.push_back(shard.text_len);
        }
    }
    ShardData all;
    all.pixels = shards[0].pixels;
    all.inputs = torch::cat(inputs);
    all.labels = torch::cat(labels);
    if (!tokens.empty()) {
        all.text_tokens = torch::cat(tokens);  // mixed float types promote (to f32)
        all.text_len = torch::cat(lengths);
        all.text_start = starts_of(all.text_len);
    }
    return all;
}

Result<ShardData> load_training_set(const std::filesystem::path& dir, const DatasetManifest& manifest) {
    std::vector<ShardData> shards;
    for (const auto& file : manifest.train) {
        auto shard = load_shard_file(dir / file.file);
        if (!shard) return with_context(file.file, shard.error());
        shards.push_back(std::move(*shard));
    }
    return concat_shards(shards);
}

}  // namespace tessera::common
