// Fashion-MNIST preparation. Latent mode: pad to 32×32, fit the autoencoder (or reuse the one
// already in the output directory), encode, scale latents to unit variance, and write f16
// shards; pixel mode writes the 28×28 images as they are. dataset.json is written last, so a
// directory with one is complete, and a second run reuses it.
#include "prepare.h"

#include <torch/torch.h>

#include <cstdio>

#include "bytes.h"
#include "dataset_manifest.h"
#include "file_io.h"
#include "idx_file.h"
#include "progress_bar.h"
#include "shard_writer.h"
#include "torch/autoencoder_training.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"

namespace tessera::data {
namespace {

using common::Error;
using common::Result;
using common::Status;

const std::vector<std::string> kClasses = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                           "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
constexpr std::int64_t kPreviewPerClass = 2;
constexpr std::int64_t kImageSide = 28;  // Fashion-MNIST's images are kImageSide × kImageSide

struct Split {
    torch::Tensor images;  // u8 (N, 1, 28, 28)
    torch::Tensor labels;  // i64 (N)
};

Result<Split> load_split(const std::filesystem::path& source, const std::string& prefix, std::int64_t limit) {
    auto images = read_idx_file(source / (prefix + "-images-idx3-ubyte.gz"));
    if (!images) return images.error();
    auto labels = read_idx_file(source / (prefix + "-labels-idx1-ubyte.gz"));
    if (!labels) return labels.error();
    if (images->dims.size() != 3 || images->dims[1] != kImageSide || images->dims[2] != kImageSide)
        return common::make_error(prefix + " images are not N×28×28");
    if (labels->dims.size() != 1 || labels->dims[0] != images->dims[0])
        return common::make_error(prefix + " labels do not match the images in count");
    auto n = images->dims[0];
    Split split;
    split.images = torch::from_blob(images->values.data(), {n, 1, kImageSide, kImageSide}, torch::kUInt8).clone();
    split.labels = torch::from_blob(labels->values.data(), {n}, torch::kUInt8).to(torch::kInt64);
    if (split.labels.max().item<std::int64_t>() >= static_cast<std::int64_t>(kClasses.size()))
        return common::make_error(prefix + " labels hold a class above 9");
    if (limit > 0 && limit < n) {
        split.images = split.images.slice(0, 0, limit);
        split.labels = split.labels.slice(0, 0, limit);
    }
    return split;
}

// u8 28×28 → f32 32×32 in [-1, 1], padded with background.
torch::Tensor autoencoder_input(const torch::Tensor& images) {
    auto x = images.to(torch::kFloat32) / 127.5 - 1.0;
    return torch::constant_pad_nd(x, {2, 2, 2, 2}, -1.0);
}

// Splits (inputs, labels) into shards of nearly equal size, at most `shard_size` each.
Result<std::vector<common::DatasetFile>> write_shards(const std::filesystem::path& dir, const std::string& key,
                                                      const torch::Tensor& inputs, const torch::Tensor& labels,
                                                      std::int64_t shard_size) {
    auto n = inputs.size(0);
    auto count = (n + shard_size - 1) / shard_size;
    std::vector<common::DatasetFile> files;
    common::ProgressBar bar("writing shards", count);
    for (std::int64_t i = 0; i < count; ++i) {
        auto begin = n * i / count, end = n * (i + 1) / count;
        char name[64];
        std::snprintf(name, sizeof name, "train-%03lld.safetensors.zst", static_cast<long long>(i));
        auto file =
            write_tensor_file(dir, name, {{key, inputs.slice(0, begin, end)}, {"labels", labels.slice(0, begin, end)}},
                              true, end - begin);
        if (!file) return file.error();
        files.push_back(std::move(file).value());
        bar.update(i + 1);
    }
    bar.finish(std::to_string(count) + " shards of about " + std::to_string(n / count) + " samples");
    return files;
}

Result<common::Autoencoder> load_autoencoder(const std::filesystem::path& dir) {
    common::Autoencoder ae{common::Encoder(), common::Decoder()};
    for (auto [name, module] : {std::pair<std::string, torch::nn::Module*>{"encoder.safetensors", ae.encoder.get()},
                                {"decoder.safetensors", ae.decoder.get()}})
        if (auto loaded = common::load_state_file(*module, dir / name, 64 * common::kMiB); !loaded)
            return loaded.error();
    ae.encoder->eval();
    ae.decoder->eval();
    return ae;
}

Result<common::Autoencoder> fit_or_reuse_autoencoder(const PrepareOptions& options, const torch::Tensor& train_x) {
    if (std::filesystem::exists(options.out / "encoder.safetensors") &&
        std::filesystem::exists(options.out / "decoder.safetensors")) {
        auto reused = load_autoencoder(options.out);
        if (reused) {
            std::fprintf(stderr, "autoencoder: reusing encoder.safetensors and decoder.safetensors\n");
            return reused;
        }
        std::fprintf(stderr, "autoencoder: cannot reuse the saved one (%s); training again\n",
                     reused.message().c_str());
    }
    common::ProgressBar bar("training autoencoder", options.autoencoder_steps);
    common::AutoencoderConfig config;
    config.steps = options.autoencoder_steps;
    config.seed = options.seed;
    double last_loss = 0;
    auto ae = common::train_autoencoder(train_x, config, [&](std::int64_t step, std::int64_t, double loss) {
        last_loss = loss;
        bar.update(step, "mse " + std::to_string(loss));
    });
    if (!ae) return ae.error();
    bar.finish(std::to_string(options.autoencoder_steps) + " steps, final batch mse " + std::to_string(last_loss));
    return ae;
}

Status prepare_latents(const PrepareOptions& options, const Split& train, const Split& test,
                       common::DatasetManifest& manifest) {
    auto train_x = autoencoder_input(train.images);
    auto test_x = autoencoder_input(test.images);
    auto ae = fit_or_reuse_autoencoder(options, train_x);
    if (!ae) return ae.error();
    manifest.reconstruction_mse = common::reconstruction_mse(*ae, test_x);
    std::fprintf(stderr, "autoencoder: reconstruction mse %.5f on the %lld test images (pixels in [-1, 1])\n",
                 manifest.reconstruction_mse, static_cast<long long>(test_x.size(0)));
    using Saved = std::tuple<const char*, const torch::nn::Module*, common::DatasetFile*>;
    for (auto [name, module, target] : {Saved{"encoder.safetensors", ae->encoder.get(), &manifest.encoder},
                                        Saved{"decoder.safetensors", ae->decoder.get(), &manifest.decoder}}) {
        auto file = write_tensor_file(options.out, name, common::state_of(*module), false, 0);
        if (!file) return file.error();
        *target = std::move(file).value();
    }

    auto train_z = common::encode_images(ae->encoder, train_x);
    auto test_z = common::encode_images(ae->encoder, test_x);
    manifest.scale_factor = 1.0 / train_z.std().item<double>();
    auto train_latents = (train_z * manifest.scale_factor).to(torch::kFloat16);
    auto test_latents = (test_z * manifest.scale_factor).to(torch::kFloat16);
    auto shards = write_shards(options.out, "latents", train_latents, train.labels, options.shard_size);
    if (!shards) return shards.error();
    manifest.train = std::move(shards).value();
    auto validation =
        write_tensor_file(options.out, "validation.safetensors.zst",
                          {{"latents", test_latents}, {"labels", test.labels}}, true, test.labels.size(0));
    if (!validation) return validation.error();
    manifest.validation = std::move(validation).value();

    // preview.png: originals (top rows) above what the decoder makes of the stored f16 latents.
    std::vector<torch::Tensor> picks;
    bool every_class = true;
    for (std::int64_t c = 0; c < static_cast<std::int64_t>(kClasses.size()); ++c) {
        picks.push_back((test.labels == c).nonzero().flatten().slice(0, 0, kPreviewPerClass));
        every_class = every_class && picks.back().size(0) == kPreviewPerClass;
    }
    // Row-major: the k-th example of every class; small test subsets take the first images.
    auto index =
        every_class ? torch::stack(picks, 1).flatten() : torch::arange(std::min<std::int64_t>(test.labels.size(0), 20));
    torch::NoGradGuard no_grad;
    auto decoded =
        ae->decoder->forward(test_latents.index_select(0, index).to(torch::kFloat32) / manifest.scale_factor);
    auto png = common::images_to_png(torch::cat({test_x.index_select(0, index), decoded}), kClasses.size(), 3);
    if (!png) return png.error();
    return common::write_file_atomic(options.out / "preview.png", *png);
}

Status prepare_pixels(const PrepareOptions& options, const Split& train, const Split& test,
                      common::DatasetManifest& manifest) {
    auto shards = write_shards(options.out, "pixels", train.images, train.labels, options.shard_size);
    if (!shards) return shards.error();
    manifest.train = std::move(shards).value();
    auto validation = write_tensor_file(options.out, "validation.safetensors.zst",
                                        {{"pixels", test.images}, {"labels", test.labels}}, true, test.labels.size(0));
    if (!validation) return validation.error();
    manifest.validation = std::move(validation).value();
    return {};
}

}  // namespace

common::Status prepare_fashion_mnist(const PrepareOptions& options) {
    auto manifest_path = options.out / "dataset.json";
    std::string kind = options.pixels ? "pixels" : "latents";
    if (std::filesystem::exists(manifest_path)) {
        auto existing = common::load_dataset_manifest(manifest_path);
        if (existing && existing->kind == kind && common::verify_dataset_files(options.out, *existing).ok()) {
            std::fprintf(stderr, "%s is complete: reusing it (delete dataset.json to prepare again)\n",
                         options.out.c_str());
            return {};
        }
        std::fprintf(stderr, "%s: the existing dataset.json is stale or incomplete; preparing again\n",
                     options.out.c_str());
    }
    if (options.shard_size < 1) return common::make_error("--shard-size must be at least 1");
    std::error_code ec;
    std::filesystem::create_directories(options.out, ec);
    if (ec) return common::make_error("cannot create " + options.out.string() + ": " + ec.message());
    try {
        auto train = load_split(options.source, "train", options.limit);
        if (!train) return train.error();
        auto test =
            load_split(options.source, "t10k", options.limit > 0 ? std::max<std::int64_t>(options.limit / 6, 1) : 0);
        if (!test) return test.error();

        common::DatasetManifest manifest;
        manifest.name = "fashion-mnist";
        manifest.kind = kind;
        manifest.classes = kClasses;
        manifest.sample_shape = options.pixels ? std::vector<std::int64_t>{1, kImageSide, kImageSide}
                                               : std::vector<std::int64_t>{common::kLatentChannels, common::kLatentSize,
                                                                           common::kLatentSize};
        auto status = options.pixels ? prepare_pixels(options, *train, *test, manifest)
                                     : prepare_latents(options, *train, *test, manifest);
        if (!status) return status;
        return common::save_dataset_manifest(manifest_path, manifest);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("prepare failed: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::data
