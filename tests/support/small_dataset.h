// A small Fashion-MNIST dataset prepared once per test process with the real tessera-data
// pipeline (first 4000 training images, a briefly trained autoencoder).
#pragma once

#include <filesystem>
#include <memory>

#include "prepare.h"
#include "temp_dir.h"

namespace tessera::testing {

constexpr std::int64_t kSmallDatasetImages = 4000;
constexpr std::int64_t kSmallDatasetAutoencoderSteps = 150;

inline const std::filesystem::path& small_latent_dataset() {
    static std::unique_ptr<TempDir> dir;
    if (!dir) {
        dir = std::make_unique<TempDir>();
        data::PrepareOptions options;
        options.out = dir->path();
        options.limit = kSmallDatasetImages;
        options.shard_size = 1000;
        options.autoencoder_steps = kSmallDatasetAutoencoderSteps;
        auto status = data::prepare_fashion_mnist(options);
        if (!status) throw std::runtime_error("preparing the test dataset failed: " + status.message());
    }
    return dir->path();
}

}  // namespace tessera::testing
