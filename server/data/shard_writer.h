// Writes a shard or model file into a dataset directory: safetensors, optionally zstd,
// atomically, and returns its manifest entry (name, SHA-256, size, samples).
#pragma once

#include <filesystem>

#include "dataset_manifest.h"
#include "torch/tensor_convert.h"

namespace tessera::data {

// Writes `bytes` as `name` in `dir`, atomically.
common::Result<common::DatasetFile> write_dataset_file(const std::filesystem::path& dir, const std::string& name,
                                                       const common::Bytes& bytes, std::int64_t samples);

common::Result<common::DatasetFile> write_tensor_file(const std::filesystem::path& dir, const std::string& name,
                                                      const common::TorchTensorMap& tensors, bool compress,
                                                      std::int64_t samples);

}  // namespace tessera::data
