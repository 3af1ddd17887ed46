// A tiny latent dataset written directly (random 4×8×8 latents, 10 classes): two training
// shards and a validation shard with a dataset.json, for server tests that need a task but
// not the Fashion-MNIST pipeline.
#pragma once

#include <filesystem>
#include <random>

#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "sha256.h"

namespace tessera::testing {

inline common::DatasetFile write_synthetic_shard(const std::filesystem::path& dir, const std::string& name,
                                                 std::int64_t samples, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> latents(static_cast<std::size_t>(samples * 4 * 8 * 8));
    for (auto& v : latents) v = normal(rng);
    std::vector<std::int64_t> labels(static_cast<std::size_t>(samples));
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>(i % 10);
    std::vector<common::TensorView> views(2);
    views[0].name = "latents";
    views[0].dtype = common::DType::F32;
    views[0].shape = {samples, 4, 8, 8};
    views[0].data = {reinterpret_cast<const std::uint8_t*>(latents.data()), latents.size() * sizeof(float)};
    views[1].name = "labels";
    views[1].dtype = common::DType::I64;
    views[1].shape = {samples};
    views[1].data = {reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size() * sizeof(std::int64_t)};
    auto bytes = common::write_safetensors(views).value();
    if (!common::write_file_atomic(dir / name, bytes)) throw std::runtime_error("cannot write " + name);
    return {name, common::sha256_hex(bytes), static_cast<std::int64_t>(bytes.size()), samples};
}

inline void write_synthetic_dataset(const std::filesystem::path& dir, int train_shards = 2) {
    std::filesystem::create_directories(dir);
    common::DatasetManifest manifest;
    manifest.name = "synthetic";
    manifest.sample_shape = {4, 8, 8};
    manifest.classes = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    for (int i = 0; i < train_shards; ++i)
        manifest.train.push_back(write_synthetic_shard(dir, "train-" + std::to_string(i) + ".safetensors", 256,
                                                       static_cast<std::uint32_t>(i + 1)));
    manifest.validation = write_synthetic_shard(dir, "validation.safetensors", 128, 99);
    if (!common::save_dataset_manifest(dir / "dataset.json", manifest)) throw std::runtime_error("cannot write dataset.json");
}

}  // namespace tessera::testing
