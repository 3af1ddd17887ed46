// What both `prepare` commands share: Fashion-MNIST's IDX files as tensors, the
// autoencoder's input convention, and fitting (or reusing) the frozen autoencoder.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <string>
#include <vector>

#include "dataset_manifest.h"
#include "result.h"
#include "torch/autoencoder_training.h"

namespace tessera::data {

constexpr std::int64_t kImageSide = 28;  // Fashion-MNIST's images are kImageSide × kImageSide

// The ten class names, in label order ("T-shirt/top" … "Ankle boot").
const std::vector<std::string>& fashion_mnist_classes();

struct Split {
    torch::Tensor images;  // u8 (N, 1, 28, 28)
    torch::Tensor labels;  // i64 (N)
};

// `prefix` is "train" or "t10k"; limit > 0 keeps the first `limit` images.
common::Result<Split> load_split(const std::filesystem::path& source, const std::string& prefix, std::int64_t limit);

// u8 images → f32 in [-1, 1], padded by `pad` pixels of background on every side.
torch::Tensor autoencoder_input(const torch::Tensor& images, std::int64_t pad = 2);

// The encoder and decoder saved in `dir` (encoder.safetensors, decoder.safetensors), in eval mode.
common::Result<common::Autoencoder> load_autoencoder(const std::filesystem::path& dir);

// Reuses the autoencoder saved in `dir` when it loads, else trains one on `train_x`
// (f32 (N, 1, 32, 32) in [-1, 1]) for `steps` AdamW steps, with a progress bar.
common::Result<common::Autoencoder> fit_or_reuse_autoencoder(const std::filesystem::path& dir, std::int64_t steps,
                                                             std::uint64_t seed, const torch::Tensor& train_x);

// Writes encoder.safetensors and decoder.safetensors into `dir` and names them in `manifest`.
common::Status write_autoencoder(const std::filesystem::path& dir, const common::Autoencoder& autoencoder,
                                 common::DatasetManifest& manifest);

}  // namespace tessera::data
