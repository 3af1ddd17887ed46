// Constants of the safetensors tensor-file format (spec: docs/tensor_format.md).
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <string_view>

namespace tessera::common {

// The format stores little-endian data; Tessera reads and writes it in place.
static_assert(std::endian::native == std::endian::little, "Tessera needs a little-endian host");

enum class DType : std::uint8_t { F32, F16, BF16, I8, U8, I32, I64 };

constexpr std::size_t kHeaderLengthBytes = 8;  // u64 little-endian header length
constexpr std::size_t kHeaderAlignment = 8;    // writers pad the header with spaces
constexpr std::size_t kMaxRank = 8;
constexpr std::size_t kMaxTensorNameBytes = 1024;
constexpr std::string_view kMetadataKey = "__metadata__";

constexpr std::size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::F32: return 4;
        case DType::F16: return 2;
        case DType::BF16: return 2;
        case DType::I8: return 1;
        case DType::U8: return 1;
        case DType::I32: return 4;
        case DType::I64: return 8;
    }
    return 0;
}

constexpr std::string_view dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32: return "F32";
        case DType::F16: return "F16";
        case DType::BF16: return "BF16";
        case DType::I8: return "I8";
        case DType::U8: return "U8";
        case DType::I32: return "I32";
        case DType::I64: return "I64";
    }
    return "?";
}

constexpr std::optional<DType> dtype_from_name(std::string_view name) {
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64})
        if (dtype_name(d) == name) return d;
    return std::nullopt;
}

}  // namespace tessera::common
