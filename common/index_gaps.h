// Sparse indices as gaps: strictly increasing flat indices i_0 < i_1 < … are stored as the
// unsigned LEB128 varints of i_0 and of i_k − i_(k−1) − 1, so a top-k selection of density d
// costs about log2(1/d) + 1 bits an entry instead of 32 (docs/tensor_format.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// `indices` must be strictly increasing and non-negative.
Bytes encode_index_gaps(std::span<const std::int32_t> indices);

// The indices `gaps` holds, each below `limit`; an error for a truncated or over-long varint
// (more than 5 bytes, or not minimal), or an index at or past `limit`.
Result<std::vector<std::int32_t>> decode_index_gaps(ByteView gaps, std::uint64_t limit);

}  // namespace tessera::common
