// `tessera-data inspect FILE`: what a tensor file (plain or zstd) holds.
#pragma once

#include <filesystem>
#include <ostream>

#include "result.h"

namespace tessera::data {

common::Status inspect_tensor_file(const std::filesystem::path& path, std::ostream& out);

}  // namespace tessera::data
