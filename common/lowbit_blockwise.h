// Low-bit quantisation (4 or 2 bits a value) with one absmax scale per block of 256 values,
// packed little-end first into bytes. The levels are mid-rise, s · (q + ½) for q in
// [−2^(b−1), 2^(b−1) − 1], with s = max|x| / (2^(b−1) − ½) over the block, so every value
// decodes within s/2 of itself and none to 0 (a kept top-k entry never vanishes); a block of
// zeros has s = 0 and decodes to zeros. 2 bits: ±s/2, ±3s/2; 4 bits: ±s/2 … ±15s/2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// Bytes that `count` values of `bits` (2 or 4) take packed.
constexpr std::size_t packed_byte_count(std::size_t count, int bits) {
    return (count * static_cast<std::size_t>(bits) + 7) / 8;
}

struct PackedValues {
    Bytes packed;               // packed_byte_count(values.size(), bits) bytes; unused high bits 0
    std::vector<float> scales;  // one per block of 256 (int8_block_count)
};

// Values must be finite; bits is 2 or 4.
PackedValues quantize_packed_blockwise(std::span<const float> values, int bits);

// The `count` values that `packed` and `scales` hold; an error when the byte or scale count is
// wrong, a scale is negative or not finite, or the padding bits of the last byte are not 0.
Result<std::vector<float>> dequantize_packed_blockwise(ByteView packed, std::span<const float> scales,
                                                       std::size_t count, int bits);

}  // namespace tessera::common
