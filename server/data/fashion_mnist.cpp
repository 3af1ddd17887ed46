// Fashion-MNIST loading and the frozen autoencoder, shared by the prepare commands.
#include "fashion_mnist.h"

#include <torch/torch.h>

#include <cstdio>

#include "bytes.h"
#include "idx_file.h"
#include "progress_bar.h"
#include "shard_writer.h"
#include "torch/model_state.h"

namespace tessera::data {

const std::vector<std::string>& fashion_mnist_classes() {
    static const std::vector<std::string> classes = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                     "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    return classes;
}

common::Result<Split> load_split(const std::filesystem::path& source, const std::string& prefix, std::int64_t limit) {
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
    if (split.labels.max().item<std::int64_t>() >= static_cast<std::int64_t>(fashion_mnist_classes().size()))
        return common::make_error(prefix + " labels hold a class above 9");
    if (limit > 0 && limit < n) {
        split.images = split.images.slice(0, 0, limit);
        split.labels = split.labels.slice(0, 0, limit);
    }
    return split;
}

torch::Tensor autoencoder_input(const torch::Tensor& images, std::int64_t pad) {
    auto x = images.to(torch::kFloat32) / 127.5 - 1.0;
    return pad > 0 ? torch::constant_pad_nd(x, {pad, pad, pad, pad}, -1.0) : x;
}

common::Result<common::Autoencoder> load_autoencoder(const std::filesystem::path& dir) {
    common::Autoencoder ae{common::Encoder(), common::Decoder()};
    for (auto [name, module] : {std::pair<std::string, torch::nn::Module*>{"encoder.safetensors", ae.encoder.get()},
                                {"decoder.safetensors", ae.decoder.get()}})
        if (auto loaded = common::load_state_file(*module, dir / name, 64 * common::kMiB); !loaded)
            return loaded.error();
    ae.encoder->eval();
    ae.decoder->eval();
    return ae;
}

common::Result<common::Autoencoder> fit_or_reuse_autoencoder(const std::filesystem::path& dir, std::int64_t steps,
                                                             std::uint64_t seed, const torch::Tensor& train_x) {
    if (std::filesystem::exists(dir / "encoder.safetensors") && std::filesystem::exists(dir / "decoder.safetensors")) {
        auto reused = load_autoencoder(dir);
        if (reused) {
            std::fprintf(stderr, "autoencoder: reusing encoder.safetensors and decoder.safetensors\n");
            return reused;
        }
        std::fprintf(stderr, "autoencoder: cannot reuse the saved one (%s); training again\n",
                     reused.message().c_str());
    }
    common::ProgressBar bar("training autoencoder", steps);
    common::AutoencoderConfig config;
    config.steps = steps;
    config.seed = seed;
    double last_loss = 0;
    auto ae = common::train_autoencoder(train_x, config, [&](std::int64_t step, std::int64_t, double loss) {
        last_loss = loss;
        bar.update(step, "mse " + std::to_string(loss));
    });
    if (!ae) return ae.error();
    bar.finish(std::to_string(steps) + " steps, final batch mse " + std::to_string(last_loss));
    return ae;
}

common::Status write_autoencoder(const std::filesystem::path& dir, const common::Autoencoder& autoencoder,
                                 common::DatasetManifest& manifest) {
    using Saved = std::tuple<const char*, const torch::nn::Module*, common::DatasetFile*>;
    for (auto [name, module, target] : {Saved{"encoder.safetensors", autoencoder.encoder.get(), &manifest.encoder},
                                        Saved{"decoder.safetensors", autoencoder.decoder.get(), &manifest.decoder}}) {
        auto file = write_tensor_file(dir, name, common::state_of(*module), false, 0);
        if (!file) return file.error();
        *target = std::move(file).value();
    }
    return {};
}

}  // namespace tessera::data
