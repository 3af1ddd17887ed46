// A work unit's model built from the model the volunteer holds and the unit's patches
// (docs/tensor_format.md, "Model patches"), instead of downloading it whole.
#pragma once

#include <filesystem>
#include <vector>

#include "blob_cache.h"
#include "protocol.h"
#include "result.h"

namespace tessera::client {

// Applies `patches` (files, in the unit's order) to the checkpoint at `held` and stores the
// result in the cache as the unit's model_blob. Any failure (a patch that does not decode or
// fit, a result with another SHA-256 than the unit states) is a named error and stores nothing:
// the caller downloads the model whole instead.
common::Result<std::filesystem::path> build_patched_model(const common::WorkUnit& unit,
                                                          const std::filesystem::path& held,
                                                          const std::vector<std::filesystem::path>& patches,
                                                          BlobCache& cache);

}  // namespace tessera::client
