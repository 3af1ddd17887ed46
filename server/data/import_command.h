// `tessera-data import`: checks shards written by other tools (e.g. Python's safetensors,
// such as Stable Diffusion VAE latents) and adopts them into a dataset directory.
#pragma once

#include <filesystem>
#include <vector>

#include "result.h"

namespace tessera::data {

struct ImportOptions {
    std::filesystem::path out;
    std::vector<std::filesystem::path> shards;  // training shards to add
    std::filesystem::path validation;           // the held-out shard (required for a new dataset)
    std::string name = "imported";
    double scale_factor = 1.0;     // recorded as is: latents are already scaled
    std::int64_t num_classes = 0;  // 0: one more than the largest label seen
};

common::Status import_shards(const ImportOptions& options);

}  // namespace tessera::data
