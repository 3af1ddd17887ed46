// Fashion-MNIST preparation. Latent mode: pad to 32×32, fit the autoencoder (or reuse the one
// already in the output directory), encode, scale latents to unit variance, and write f16
// shards; pixel mode writes the 28×28 images as they are. dataset.json is written last, so a
// directory with one is complete, and a second run reuses it.
#include "prepare.h"

#include <torch/torch.h>

#include <cstdio>

#include "dataset_manifest.h"
#include "fashion_mnist.h"
#include "file_io.h"
#include "progress_bar.h"
#include "shard_writer.h"
#include "torch/sampling.h"

namespace tessera::data {
namespace {

using common::Error;
using common::Result;
using common::Status;

constexpr std::int64_t kPreviewPerClass = 2;

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

Status prepare_latents(const PrepareOptions& options, const Split& train, const Split& test,
                       common::DatasetManifest& manifest) {
    auto train_x = autoencoder_input(train.images);
    auto test_x = autoencoder_input(test.images);
    auto ae = fit_or_reuse_autoencoder(options.out, options.autoencoder_steps, options.seed, train_x);
    if (!ae) return ae.error();
    manifest.reconstruction_mse = common::reconstruction_mse(*ae, test_x);
    std::fprintf(stderr, "autoencoder: reconstruction mse %.5f on the %lld test images (pixels in [-1, 1])\n",
                 manifest.reconstruction_mse, static_cast<long long>(test_x.size(0)));
    if (auto written = write_autoencoder(options.out, *ae, manifest); !written) return written;

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
    for (std::int64_t c = 0; c < static_cast<std::int64_t>(fashion_mnist_classes().size()); ++c) {
        picks.push_back((test.labels == c).nonzero().flatten().slice(0, 0, kPreviewPerClass));
        every_class = every_class && picks.back().size(0) == kPreviewPerClass;
    }
    // Row-major: the k-th example of every class; small test subsets take the first images.
    auto index =
        every_class ? torch::stack(picks, 1).flatten() : torch::arange(std::min<std::int64_t>(test.labels.size(0), 20));
    torch::NoGradGuard no_grad;
    auto decoded =
        ae->decoder->forward(test_latents.index_select(0, index).to(torch::kFloat32) / manifest.scale_factor);
    auto png =
        common::images_to_png(torch::cat({test_x.index_select(0, index), decoded}), fashion_mnist_classes().size(), 3);
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
        if (existing && existing->name == "fashion-mnist" && existing->kind == kind &&
            common::verify_dataset_files(options.out, *existing).ok()) {
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
        manifest.classes = fashion_mnist_classes();
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
