// Blockwise absmax int8 quantisation on the CPU.
#include "int8_blockwise.h"

#include <algorithm>
#include <cmath>

namespace tessera::common {

void quantize_int8_blockwise(std::span<const float> values, std::span<std::int8_t> q, std::span<float> scales) {
    for (std::size_t block = 0; block < scales.size(); ++block) {
        std::size_t begin = block * kInt8BlockSize;
        std::size_t end = std::min(begin + kInt8BlockSize, values.size());
        float absmax = 0.0f;
        for (std::size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(values[i]));
        float scale = absmax / 127.0f;
        scales[block] = scale;
        float inverse = scale > 0.0f ? 1.0f / scale : 0.0f;
        for (std::size_t i = begin; i < end; ++i) {
            float rounded = std::nearbyint(values[i] * inverse);
            q[i] = static_cast<std::int8_t>(std::clamp(rounded, -127.0f, 127.0f));
        }
    }
}

void dequantize_int8_blockwise(std::span<const std::int8_t> q, std::span<const float> scales, std::span<float> values) {
    for (std::size_t i = 0; i < q.size(); ++i) values[i] = static_cast<float>(q[i]) * scales[i / kInt8BlockSize];
}

}  // namespace tessera::common
