// A reader of NumPy .npy arrays held in memory (numpy.save's format), for untrusted bytes.
// No I/O, no torch; the array's data is a view into the input.
//
// Layout: magic "\x93NUMPY", major and minor version bytes (1.0: u16 little-endian header
// length; 2.0 and 3.0: u32), the header, then the data. The header is a Python dict literal
// ending in '\n' (padded with spaces) with exactly the keys 'descr' (a dtype string below),
// 'fortran_order' (only False is accepted) and 'shape' (a tuple of non-negative integers; a
// one-element tuple needs its comma). The data must be exactly the shape's product times the
// item size. Structured, big-endian, object and string dtypes are refused.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

enum class NpyType { Bool, U8, I8, I16, U16, I32, U32, I64, U64, F16, F32, F64 };

inline constexpr std::size_t kMaxNpyHeaderBytes = 64 * 1024;
inline constexpr std::size_t kMaxNpyRank = 8;

struct NpyArray {
    NpyType type = NpyType::F32;
    std::vector<std::int64_t> shape;
    common::ByteView data;  // little-endian, C order, inside the parsed buffer

    std::int64_t numel() const;
};

// numpy's name for a type ("float16", "bool", ...) and its descr ("<f2", "|b1", ...).
std::string_view npy_type_name(NpyType type);
std::string_view npy_descr(NpyType type);
std::size_t npy_type_size(NpyType type);

common::Result<NpyArray> parse_npy(common::ByteView bytes);

}  // namespace tessera::data
