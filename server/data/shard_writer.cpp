// Shard and model files.
#include "shard_writer.h"

#include "file_io.h"
#include "sha256.h"
#include "zstd_codec.h"

namespace tessera::data {

common::Result<common::DatasetFile> write_dataset_file(const std::filesystem::path& dir, const std::string& name,
                                                       const common::Bytes& bytes, std::int64_t samples) {
    if (auto written = common::write_file_atomic(dir / name, bytes); !written) return written.error();
    return common::DatasetFile{name, common::sha256_hex(bytes), static_cast<std::int64_t>(bytes.size()), samples};
}

common::Result<common::DatasetFile> write_tensor_file(const std::filesystem::path& dir, const std::string& name,
                                                      const common::TorchTensorMap& tensors, bool compress,
                                                      std::int64_t samples) {
    auto bytes = common::to_safetensors(tensors, {{"format", "pt"}});
    if (!bytes) return bytes.error();
    if (compress) {
        auto packed = common::zstd_compress(*bytes, 9);
        if (!packed) return packed.error();
        bytes = std::move(packed).value();
    }
    return write_dataset_file(dir, name, *bytes, samples);
}

}  // namespace tessera::data
