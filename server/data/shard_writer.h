// Writes a shard or model file into a dataset directory: safetensors, optionally zstd,
// atomically, and returns its manifest entry (name, SHA-256, size, samples).
#pragma once

#include <filesystem>

#include "dataset_manifest.h"
#include "torch/tensor_convert.h"

namespace tessera::data {

common::Result<common::DatasetFile> write_tensor_file(const std::filesystem::path& dir, const std::string& name,
                                                      const common::TorchTensorMap& tensors, bool compress,
                                                      std::int64_t samples);

}  // namespace tessera::data
