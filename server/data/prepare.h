// `tessera-data prepare fashion-mnist`: IDX files → (autoencoder →) shards + dataset.json.
#pragma once

#include <filesystem>

#include "result.h"

namespace tessera::data {

struct PrepareOptions {
    std::filesystem::path source = "/usr/share/datasets/fashion-mnist";
    std::filesystem::path out;
    bool pixels = false;  // write 28×28 pixel shards for the classifier instead
    std::int64_t shard_size = 4096;
    std::int64_t autoencoder_steps = 2000;
    std::int64_t limit = 0;  // > 0: use only the first N training images (tests)
    std::uint64_t seed = 0;
};

common::Status prepare_fashion_mnist(const PrepareOptions& options);

}  // namespace tessera::data
