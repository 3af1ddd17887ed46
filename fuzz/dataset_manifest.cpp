// dataset.json as an operator receives it with a dataset (the server reads it to create a task).
#include <filesystem>
#include <fstream>

#include "dataset_manifest.h"
#include "file_io.h"
#include "fuzz_target.h"

using namespace tessera::common;

namespace {

// Rewritten for every input: the manifest is read from a path.
std::filesystem::path manifest_path() { return fuzz_scratch_directory() / "dataset.json"; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    {
        std::ofstream out(manifest_path(), std::ios::binary | std::ios::trunc);  // no fsync: a scratch file
        out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) return 0;
    }
    (void)load_dataset_manifest(manifest_path());
    return 0;
}

std::vector<Bytes> fuzz_seeds() {
    DatasetManifest manifest;
    manifest.name = "fashion-mnist";
    manifest.sample_shape = {4, 8, 8};
    manifest.scale_factor = 0.18;
    manifest.classes = {"t-shirt", "trouser"};
    manifest.train = {{"train-000.safetensors", std::string(64, 'a'), 1000, 10}};
    manifest.validation = {"validation.safetensors", std::string(64, 'b'), 500, 5};
    manifest.encoder = {"encoder.safetensors", std::string(64, 'c'), 300, 0};
    manifest.decoder = {"decoder.safetensors", std::string(64, 'd'), 300, 0};
    auto path = fuzz_scratch_directory() / "seed.json";
    if (!save_dataset_manifest(path, manifest)) return {};
    auto bytes = read_file(path, 1 << 20);
    if (!bytes) return {};
    return {*bytes};
}
