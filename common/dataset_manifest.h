// dataset.json: what `tessera-data` produced and the server reads to create a task — the
// shards with their hashes, the sample shape, the latent scale factor, the class names and
// the frozen autoencoder's files. Format in docs/dataset_format.md.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "result.h"

namespace tessera::common {

// Bounds of a dataset's description that a task made from it repeats (its stored config):
// one set, so that every dataset the manifest reader accepts makes a task that can be loaded.
// Decompressed shards are capped at this size; a larger claim is refused.
constexpr std::uint64_t kMaxShardBytes = std::uint64_t{2} << 30;
constexpr std::int64_t kMaxSampleDim = 1 << 16;
constexpr std::int64_t kMaxTextDim = 1 << 16;
constexpr std::int64_t kMaxClasses = 100000;

struct DatasetFile {
    std::string file;    // relative to the dataset directory
    std::string sha256;  // of the file's bytes
    std::int64_t bytes = 0;
    std::int64_t samples = 0;  // shards only; 0 for model files
};

struct DatasetManifest {
    std::string name;
    std::string kind = "latents";            // "latents" or "pixels"
    std::vector<std::int64_t> sample_shape;  // e.g. [4, 8, 8]
    double scale_factor = 1.0;               // stored latents = encoder output × scale_factor
    std::vector<std::string> classes;
    std::int64_t text_dim = 0;
    std::vector<DatasetFile> train;
    DatasetFile validation;
    DatasetFile encoder;  // empty file name when absent (pixels, imported data)
    DatasetFile decoder;
    // Optional (absent from older manifests and from datasets without them; empty file name):
    DatasetFile heldout;             // a second held-out shard: combinations training never shows
    DatasetFile text_encoder;        // the frozen text encoder that embedded the captions
    double reconstruction_mse = -1;  // of the autoencoder on the validation images; -1: n/a
};

Result<DatasetManifest> load_dataset_manifest(const std::filesystem::path& path);
Status save_dataset_manifest(const std::filesystem::path& path, const DatasetManifest& manifest);

// Checks that every file the manifest names exists in `dir` with its recorded size and hash.
Status verify_dataset_files(const std::filesystem::path& dir, const DatasetManifest& manifest);

}  // namespace tessera::common
