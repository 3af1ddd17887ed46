// `tessera-data prepare fashion-mnist` and `prepare canvases`: IDX files → (autoencoder →)
// shards + dataset.json.
#pragma once

#include <filesystem>

#include "result.h"

namespace tessera::data {

struct PrepareOptions {
    std::filesystem::path source = "/usr/share/datasets/fashion-mnist";
    std::filesystem::path out;
    bool pixels = false;  // write 28×28 pixel shards for the classifier instead (fashion-mnist)
    std::int64_t shard_size = 4096;
    std::int64_t autoencoder_steps = 2000;
    std::int64_t limit = 0;  // > 0: fashion-mnist: the first N training images; canvases: N canvases (tests)
    std::uint64_t seed = 0;
};

common::Status prepare_fashion_mnist(const PrepareOptions& options);

// Captioned two-item canvases for text-to-image tasks (docs/dataset_format.md, "prepare
// canvases"; implemented in prepare_canvases.cpp). `pixels` is refused.
common::Status prepare_canvases(const PrepareOptions& options);

}  // namespace tessera::data
