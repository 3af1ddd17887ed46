// Patched model: read the held checkpoint, add the patches, write it as the server did.
#include "model_patcher.h"

#include "checkpoint.h"
#include "file_io.h"
#include "model_patch.h"
#include "safetensors.h"
#include "sha256.h"

namespace tessera::client {

common::Result<std::filesystem::path> build_patched_model(const common::WorkUnit& unit,
                                                          const std::filesystem::path& held,
                                                          const std::vector<std::filesystem::path>& patches,
                                                          BlobCache& cache) {
    auto held_bytes = common::read_file(held, common::kMaxModelBytes);
    if (!held_bytes) return held_bytes.error();
    auto model = common::read_checkpoint(*held_bytes);
    if (!model) return model.error();
    for (std::size_t i = 0; i < patches.size(); ++i) {
        auto patch = common::read_file(patches[i], common::kMaxModelBytes);
        if (!patch) return patch.error();
        if (auto status = common::apply_patch(*model, *patch); !status)
            return common::with_context("patch " + std::to_string(i + 1) + " of " + std::to_string(patches.size()),
                                        status.error());
    }
    auto bytes = common::write_checkpoint(*model, {unit.task_id, unit.model, unit.base_version});
    if (!bytes) return bytes.error();
    auto sha256 = common::sha256_hex(*bytes);
    if (sha256 != unit.model_blob.sha256)
        return common::make_error("the patched model's SHA-256 is " + common::short_hash(sha256) + ", the unit's " +
                                  common::short_hash(unit.model_blob.sha256));
    return cache.put(unit.model_blob, *bytes);
}

}  // namespace tessera::client
