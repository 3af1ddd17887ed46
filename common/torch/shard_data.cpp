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

Result<ShardData> parse_shard(ByteView bytes) {
    auto file = parse_safetensors(bytes);
    if (!file) return file.error();
    const auto* labels = file->find("labels");
    const auto* latents = file->find("latents");
    const auto* pixels = file->find("pixels");
    const auto* text = file->find("text_emb");
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
    if (text != nullptr && (!is_float(text->dtype) || text->shape.size() != 3 || text->shape[0] != n))
        return make_error("shard \"text_emb\" must be float of shape [N, L, D]");

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
    if (text != nullptr) {
        auto text_tensor = to_torch(*text);
        if (!text_tensor) return text_tensor.error();
        shard.text_emb = text_tensor->to(torch::kFloat32);
    }
    return shard;
}

}  // namespace

torch::Tensor standardise_pixels(const torch::Tensor& unit_pixels) { return (unit_pixels - kPixelMean) / kPixelStd; }

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
    std::vector<torch::Tensor> inputs, labels, texts;
    for (const auto& shard : shards) {
        if (shard.inputs.sizes().slice(1) != shards[0].inputs.sizes().slice(1) || shard.pixels != shards[0].pixels)
            return make_error("shards differ in sample shape or kind");
        if (shard.text_emb.defined() != shards[0].text_emb.defined())
            return make_error("some shards have text_emb and some do not");
        inputs.push_back(shard.inputs);
        labels.push_back(shard.labels);
        if (shard.text_emb.defined()) texts.push_back(shard.text_emb);
    }
    ShardData all;
    all.pixels = shards[0].pixels;
    all.inputs = torch::cat(inputs);
    all.labels = torch::cat(labels);
    if (!texts.empty()) {
        for (const auto& t : texts)
            if (t.sizes().slice(1) != texts[0].sizes().slice(1)) return make_error("shards differ in text_emb shape");
        all.text_emb = torch::cat(texts);
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
