// A tiny dataset written directly (random 4×8×8 latents, or 1×28×28 u8 pixels whose
// brightness tells the class, for the cnn preset; 10 classes): training shards and a validation shard with a dataset.json, for
// server tests that need a task but not the Fashion-MNIST pipeline.
#pragma once

#include <filesystem>
#include <random>

#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "sha256.h"

namespace tessera::testing {

enum class SyntheticKind { Latents, Pixels };

// Writes `inputs` (the "latents" or "pixels" tensor) and labels 0…9 repeating as a shard.
inline common::DatasetFile write_labelled_shard(const std::filesystem::path& dir, const std::string& name,
                                                const common::TensorView& inputs) {
    auto samples = inputs.shape[0];
    std::vector<std::int64_t> labels(static_cast<std::size_t>(samples));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    std::vector<common::TensorView> views{inputs, {}};
    views[1].name = "labels";
    views[1].dtype = common::DType::I64;
    views[1].shape = {samples};
    views[1].data = {reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size() * sizeof(std::int64_t)};
    auto bytes = common::write_safetensors(views).value();
    if (!common::write_file_atomic(dir / name, bytes)) throw std::runtime_error("cannot write " + name);
    return {name, common::sha256_hex(bytes), static_cast<std::int64_t>(bytes.size()), samples};
}

// 1×28×28 u8 images (the cnn preset's input): noise brightened by 12 levels per class (the
// label is the row's index mod 10), so a classifier can learn them in a few steps.
inline common::DatasetFile write_synthetic_pixel_shard(const std::filesystem::path& dir, const std::string& name,
                                                       std::int64_t samples, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 127);
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(samples * 28 * 28));
    for (std::size_t i = 0; i < pixels.size(); ++i) {
        auto label = static_cast<int>((i / (28 * 28)) % 10);
        pixels[i] = static_cast<std::uint8_t>(byte(rng) + 12 * label);
    }
    common::TensorView view;
    view.name = "pixels";
    view.dtype = common::DType::U8;
    view.shape = {samples, 1, 28, 28};
    view.data = {pixels.data(), pixels.size()};
    return write_labelled_shard(dir, name, view);
}

// Random N(0, 1) 4×8×8 latents.
inline common::DatasetFile write_synthetic_shard(const std::filesystem::path& dir, const std::string& name,
                                                 std::int64_t samples, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> latents(static_cast<std::size_t>(samples * 4 * 8 * 8));
    for (auto& v : latents) v = normal(rng);
    common::TensorView view;
    view.name = "latents";
    view.dtype = common::DType::F32;
    view.shape = {samples, 4, 8, 8};
    view.data = {reinterpret_cast<const std::uint8_t*>(latents.data()), latents.size() * sizeof(float)};
    return write_labelled_shard(dir, name, view);
}

inline void write_synthetic_dataset(const std::filesystem::path& dir, int train_shards = 2,
                                    SyntheticKind kind = SyntheticKind::Latents) {
    std::filesystem::create_directories(dir);
    common::DatasetManifest manifest;
    manifest.name = "synthetic";
    bool pixels = kind == SyntheticKind::Pixels;
    manifest.kind = pixels ? "pixels" : "latents";
    manifest.sample_shape = pixels ? std::vector<std::int64_t>{1, 28, 28} : std::vector<std::int64_t>{4, 8, 8};
    manifest.classes = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    auto write_shard = pixels ? write_synthetic_pixel_shard : write_synthetic_shard;
    for (int i = 0; i < train_shards; ++i)
        manifest.train.push_back(
            write_shard(dir, "train-" + std::to_string(i) + ".safetensors", 256, static_cast<std::uint32_t>(i + 1)));
    manifest.validation = write_shard(dir, "validation.safetensors", 128, 99);
    if (!common::save_dataset_manifest(dir / "dataset.json", manifest))
        throw std::runtime_error("cannot write dataset.json");
}

}  // namespace tessera::testing
