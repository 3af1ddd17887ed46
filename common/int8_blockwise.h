// Int8 quantisation with one absmax scale per block of 256 values: q = round(x / s),
// s = max|x| / 127 over the block, so |x - q·s| <= s / 2. The CUDA kernel mirrors this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tessera::common {

constexpr std::size_t kInt8BlockSize = 256;

constexpr std::size_t int8_block_count(std::size_t n) { return (n + kInt8BlockSize - 1) / kInt8BlockSize; }

// `q` has values.size() entries, `scales` int8_block_count(values.size()). Values must be finite.
void quantize_int8_blockwise(std::span<const float> values, std::span<std::int8_t> q, std::span<float> scales);
void dequantize_int8_blockwise(std::span<const std::int8_t> q, std::span<const float> scales, std::span<float> values);

}  // namespace tessera::common
