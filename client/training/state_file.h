// A state file of the volunteer's: named f32 tensors in safetensors whose metadata names its
// format (the error-feedback residual, the kept optimizer state).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "named_tensor_file.h"
#include "result.h"

namespace tessera::client {

// None when the file is missing; an error naming the file when it is larger than `max_bytes`,
// unreadable, or its metadata's `format` is not `format` (then "not <what>").
common::Result<std::optional<common::NamedTensorFile>> read_state_file(const std::filesystem::path& file,
                                                                       std::string_view format,
                                                                       std::uint64_t max_bytes,
                                                                       std::string_view what);

// A metadata value, or "" when the key is absent.
std::string metadata_field(const common::TensorMetadata& metadata, const std::string& key);

}  // namespace tessera::client
