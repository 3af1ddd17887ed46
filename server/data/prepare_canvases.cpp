// `tessera-data prepare canvases`: two-item canvases with relational captions, drawn from
// Fashion-MNIST, encoded by the frozen autoencoder (fully convolutional: trained on 32×32
// items, it encodes a 64×64 canvas to 4×16×16), their captions embedded by the stand-in text
// encoder; training shards of seen scenes, a validation shard of seen scenes from the test
// images and a held-out shard of unseen ones. dataset.json is written last, as prepare does.
#include <torch/torch.h>

#include <cstdio>
#include <memory>

#include "canvas.h"
#include "dataset_manifest.h"
#include "fashion_mnist.h"
#include "file_io.h"
#include "prepare.h"
#include "progress_bar.h"
#include "shard_writer.h"
#include "stand_in_text_encoder.h"
#include "torch/sampling.h"

namespace tessera::data {
namespace {

using common::Result;
using common::Status;

constexpr const char* kDatasetName = "canvases";
constexpr std::int64_t kMinimumPool = 1000;      // images per split drawn from, whatever --limit says
constexpr std::int64_t kHeldoutCanvases = 2000;  // at full size
constexpr std::int64_t kEncodeChunk = 64;        // activations under 32 MiB: heap memory reused, not mapped anew
constexpr std::int64_t kPreviewCanvases = 8;
constexpr std::int64_t kPreviewUpscale = 2;
// Each split's stream of draws (canvas.h's own streams are 1 and 2).
constexpr std::uint64_t kTrainStream = 11;
constexpr std::uint64_t kValidationStream = 12;
constexpr std::uint64_t kHeldoutStream = 13;

struct CanvasSplit {
    std::vector<CanvasSpec> specs;
    const Split* source = nullptr;
    torch::Tensor latents;  // f32 (N, 4, 16, 16), as the encoder gives them
};

// Latents of a split's canvases, composed and encoded a chunk at a time (a full split's
// f32 canvases would take 1 GB). With `squared_error`, adds Σ (decode(encode(x)) − x)².
torch::Tensor encode_canvases(common::Autoencoder& ae, const CanvasSplit& split, const std::string& what,
                              double* squared_error) {
    torch::NoGradGuard no_grad;
    auto n = static_cast<std::int64_t>(split.specs.size());
    std::vector<torch::Tensor> parts;
    common::ProgressBar bar("encoding " + what, n);
    for (std::int64_t begin = 0; begin < n; begin += kEncodeChunk) {
        auto end = std::min(n, begin + kEncodeChunk);
        std::vector<CanvasSpec> chunk(split.specs.begin() + begin, split.specs.begin() + end);
        auto x = autoencoder_input(compose_canvases(chunk, split.source->images), 0);
        auto z = ae.encoder->forward(x);
        if (squared_error != nullptr)
            *squared_error += torch::mse_loss(ae.decoder->forward(z), x, at::Reduction::Sum).item<double>();
        parts.push_back(z);
        bar.update(end);
    }
    bar.finish(std::to_string(n) + " canvases");
    return torch::cat(parts);
}

// What a shard holds for canvases [begin, end) of a split (docs/dataset_format.md).
Result<common::TorchTensorMap> shard_tensors(const CanvasSplit& split, const torch::Tensor& latents,
                                             const StandInTextEncoder& text, std::int64_t begin, std::int64_t end) {
    auto n = end - begin;
    auto slots = torch::empty({n, 2}, torch::kInt64), attributes = torch::empty({n, 2}, torch::kInt64),
         quadrants = torch::empty({n, 2}, torch::kInt64), relation = torch::empty({n}, torch::kInt64);
    auto captions = torch::zeros({n, kCaptionBytes}, torch::kUInt8);
    auto slot_of = slots.accessor<std::int64_t, 2>(), attribute_of = attributes.accessor<std::int64_t, 2>(),
         quadrant_of = quadrants.accessor<std::int64_t, 2>();
    auto relation_of = relation.accessor<std::int64_t, 1>();
    auto caption_of_row = captions.accessor<std::uint8_t, 2>();
    std::vector<std::string> texts;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto& spec = split.specs[static_cast<std::size_t>(begin + i)];
        auto where = spec.quadrants();
        for (int k = 0; k < 2; ++k) {
            slot_of[i][k] = spec.nouns[k];
            attribute_of[i][k] = static_cast<std::int64_t>(spec.attributes[k]);
            quadrant_of[i][k] = where[k];
        }
        relation_of[i] = static_cast<std::int64_t>(spec.relation);
        texts.push_back(caption_of(spec));
        if (static_cast<std::int64_t>(texts.back().size()) > kCaptionBytes)
            return common::make_error("the caption \"" + texts.back() + "\" is longer than the `captions` rows");
        for (std::size_t b = 0; b < texts.back().size(); ++b)
            caption_of_row[i][static_cast<std::int64_t>(b)] = static_cast<std::uint8_t>(texts.back()[b]);
    }
    auto packed = text.embed_captions(texts);
    if (!packed) return packed.error();
    return common::TorchTensorMap{{"latents", latents.slice(0, begin, end)},
                                  {"labels", slots.select(1, 0).contiguous()},
                                  {"text_tokens", packed->tokens.to(torch::kFloat16)},
                                  {"text_len", packed->lengths},
                                  {"captions", captions},
                                  {"slot_classes", slots},
                                  {"relation", relation},
                                  {"attributes", attributes},
                                  {"quadrants", quadrants}};
}

Result<common::DatasetFile> write_canvas_shard(const std::filesystem::path& dir, const std::string& name,
                                               const CanvasSplit& split, const torch::Tensor& latents,
                                               const StandInTextEncoder& text, std::int64_t begin, std::int64_t end) {
    auto tensors = shard_tensors(split, latents, text, begin, end);
    if (!tensors) return tensors.error();
    return write_tensor_file(dir, name, *tensors, true, end - begin);
}

// The text encoder in `dir` when it is one with the canvases' vocabulary, else a new one.
StandInTextEncoder text_encoder_for(const std::filesystem::path& dir, std::uint64_t seed) {
    if (std::filesystem::exists(dir / kTextEncoderFile)) {
        auto reused = StandInTextEncoder::load(dir / kTextEncoderFile);
        if (reused && reused->vocabulary() == canvas_vocabulary() && reused->dim() == kStandInTextDim &&
            reused->contextual()) {
            std::fprintf(stderr, "text encoder: reusing %s\n", kTextEncoderFile);
            return std::move(reused).value();
        }
    }
    return StandInTextEncoder::create(canvas_vocabulary(), kStandInTextDim, seed);
}

bool is_complete(const std::filesystem::path& dir) {
    auto existing = common::load_dataset_manifest(dir / "dataset.json");
    // A dataset of another vocabulary (before 2026-12-04 the ten classes were the nouns) or
    // with a text encoder that ignores context (likewise) is stale.
    std::vector<std::string> nouns(noun_words().begin(), noun_words().end());
    if (!existing || existing->name != kDatasetName || existing->kind != "latents" || existing->classes != nouns ||
        existing->heldout.file.empty() || existing->text_encoder.file.empty() ||
        !common::verify_dataset_files(dir, *existing).ok())
        return false;
    auto text = StandInTextEncoder::load(dir / existing->text_encoder.file);
    return text && text->contextual();
}

struct CanvasSplits {
    Split train_images, test_images;
    CanvasSplit train, validation, heldout;
};

// The images, and which canvases each split makes of them (seen scenes from the training
// images; seen and held-out scenes from the test images).
Result<std::unique_ptr<CanvasSplits>> draw_splits(const PrepareOptions& options) {
    auto pool = options.limit > 0 ? std::max(options.limit, kMinimumPool) : 0;
    auto train_images = load_split(options.source, "train", pool);
    if (!train_images) return train_images.error();
    auto test_images = load_split(options.source, "t10k", pool);
    if (!test_images) return test_images.error();
    auto splits = std::make_unique<CanvasSplits>();
    splits->train_images = std::move(train_images).value();
    splits->test_images = std::move(test_images).value();
    auto train_count = options.limit > 0 ? options.limit : splits->train_images.labels.size(0);
    auto validation_count =
        options.limit > 0 ? std::max<std::int64_t>(options.limit / 6, 1) : splits->test_images.labels.size(0);
    auto heldout_count = std::min(validation_count, kHeldoutCanvases);
    for (auto [split, images, count, held, stream] :
         {std::tuple{&splits->train, &splits->train_images, train_count, false, kTrainStream},
          {&splits->validation, &splits->test_images, validation_count, false, kValidationStream},
          {&splits->heldout, &splits->test_images, heldout_count, true, kHeldoutStream}}) {
        split->source = images;
        auto specs = draw_canvases(count, images->labels, held, options.seed, stream);
        if (!specs) return specs.error();
        split->specs = std::move(specs).value();
    }
    std::fprintf(stderr, "canvases: %lld training, %lld validation, %lld held out (%lld of %lld scenes)\n",
                 static_cast<long long>(train_count), static_cast<long long>(validation_count),
                 static_cast<long long>(heldout_count), static_cast<long long>(kHeldoutScenes),
                 static_cast<long long>(2 * kNouns * (kNouns - 1)));
    return splits;
}

// Training shards of at most `shard_size` canvases (split evenly), the validation shard and
// the held-out shard, each with its latents scaled by the manifest's factor.
Status write_canvas_shards(const PrepareOptions& options, const CanvasSplits& splits, const StandInTextEncoder& text,
                           common::DatasetManifest& manifest) {
    auto stored = [&](const CanvasSplit& split) { return (split.latents * manifest.scale_factor).to(torch::kFloat16); };
    auto train_latents = stored(splits.train);
    auto n = static_cast<std::int64_t>(splits.train.specs.size());
    auto shards = (n + options.shard_size - 1) / options.shard_size;
    common::ProgressBar bar("writing shards", shards);
    for (std::int64_t i = 0; i < shards; ++i) {
        char name[64];
        std::snprintf(name, sizeof name, "train-%03lld.safetensors.zst", static_cast<long long>(i));
        auto file = write_canvas_shard(options.out, name, splits.train, train_latents, text, n * i / shards,
                                       n * (i + 1) / shards);
        if (!file) return file.error();
        manifest.train.push_back(std::move(file).value());
        bar.update(i + 1);
    }
    bar.finish(std::to_string(shards) + " shards of about " + std::to_string(n / shards) + " canvases");
    for (auto [split, name, target] :
         {std::tuple{&splits.validation, "validation.safetensors.zst", &manifest.validation},
          {&splits.heldout, "heldout.safetensors.zst", &manifest.heldout}}) {
        auto file = write_canvas_shard(options.out, name, *split, stored(*split), text, 0,
                                       static_cast<std::int64_t>(split->specs.size()));
        if (!file) return file.error();
        *target = std::move(file).value();
    }
    return {};
}

// preview.png: validation canvases (top row) above what the decoder makes of their stored latents.
Status write_preview(const std::filesystem::path& dir, common::Autoencoder& ae, const CanvasSplit& validation,
                     double scale_factor) {
    auto shown = std::min<std::int64_t>(kPreviewCanvases, static_cast<std::int64_t>(validation.specs.size()));
    std::vector<CanvasSpec> preview(validation.specs.begin(), validation.specs.begin() + shown);
    torch::NoGradGuard no_grad;
    auto stored = (validation.latents.slice(0, 0, shown) * scale_factor).to(torch::kFloat16);
    auto decoded = ae.decoder->forward(stored.to(torch::kFloat32) / scale_factor);
    auto canvases = autoencoder_input(compose_canvases(preview, validation.source->images), 0);
    auto png = common::images_to_png(torch::cat({canvases, decoded}), shown, kPreviewUpscale);
    if (!png) return png.error();
    return common::write_file_atomic(dir / "preview.png", *png);
}

Status prepare(const PrepareOptions& options, common::DatasetManifest& manifest) {
    auto splits = draw_splits(options);
    if (!splits) return splits.error();
    auto& [train_images, test_images, train, validation, heldout] = **splits;

    // The autoencoder learns 32×32 items (the canvases' quadrants) under the canvases' attributes.
    auto items = autoencoder_input(items_with_attributes(train_images.images, options.seed));
    auto ae = fit_or_reuse_autoencoder(options.out, options.autoencoder_steps, options.seed, items);
    if (!ae) return ae.error();
    items.reset();  // 245 MB at full size
    if (auto written = write_autoencoder(options.out, *ae, manifest); !written) return written;

    double squared_error = 0;
    train.latents = encode_canvases(*ae, train, "training canvases", nullptr);
    validation.latents = encode_canvases(*ae, validation, "validation canvases", &squared_error);
    heldout.latents = encode_canvases(*ae, heldout, "held-out canvases", nullptr);
    manifest.reconstruction_mse =
        squared_error / static_cast<double>(validation.latents.size(0) * kCanvasSide * kCanvasSide);
    std::fprintf(stderr, "autoencoder: reconstruction mse %.5f on the %lld validation canvases (pixels in [-1, 1])\n",
                 manifest.reconstruction_mse, static_cast<long long>(validation.latents.size(0)));
    manifest.scale_factor = 1.0 / train.latents.std().item<double>();
    manifest.sample_shape = {train.latents.size(1), train.latents.size(2), train.latents.size(3)};

    auto text = text_encoder_for(options.out, options.seed);
    auto text_bytes = text.to_safetensors();
    if (!text_bytes) return text_bytes.error();
    auto text_file = write_dataset_file(options.out, kTextEncoderFile, *text_bytes, 0);
    if (!text_file) return text_file.error();
    manifest.text_encoder = std::move(text_file).value();
    manifest.text_dim = text.dim();

    if (auto written = write_canvas_shards(options, **splits, text, manifest); !written) return written;
    return write_preview(options.out, *ae, validation, manifest.scale_factor);
}

}  // namespace

common::Status prepare_canvases(const PrepareOptions& options) {
    if (options.pixels) return common::make_error("canvases are latents only: --pixels is for fashion-mnist");
    if (options.shard_size < 1) return common::make_error("--shard-size must be at least 1");
    if (options.limit < 0) return common::make_error("--limit must not be negative");
    auto manifest_path = options.out / "dataset.json";
    if (std::filesystem::exists(manifest_path)) {
        if (is_complete(options.out)) {
            std::fprintf(stderr, "%s is complete: reusing it (delete dataset.json to prepare again)\n",
                         options.out.c_str());
            return {};
        }
        std::fprintf(stderr, "%s: the existing dataset.json is stale or incomplete; preparing again\n",
                     options.out.c_str());
    }
    std::error_code ec;
    std::filesystem::create_directories(options.out, ec);
    if (ec) return common::make_error("cannot create " + options.out.string() + ": " + ec.message());
    try {
        common::DatasetManifest manifest;
        manifest.name = kDatasetName;
        manifest.kind = "latents";
        manifest.classes.assign(noun_words().begin(), noun_words().end());  // `labels` and `slot_classes` name nouns
        if (auto status = prepare(options, manifest); !status) return status;
        return common::save_dataset_manifest(manifest_path, manifest);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("prepare canvases failed: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::data
