// Blockwise absmax 4- and 2-bit quantisation on the CPU.
#include "lowbit_blockwise.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "int8_blockwise.h"

namespace tessera::common {
namespace {

// The largest level in units of s: 2^(b−1) − ½ (7.5 for 4 bits, 1.5 for 2).
float top_level(int bits) { return static_cast<float>(1 << (bits - 1)) - 0.5f; }

}  // namespace

PackedValues quantize_packed_blockwise(std::span<const float> values, int bits) {
    PackedValues out;
    out.packed.assign(packed_byte_count(values.size(), bits), 0);
    out.scales.resize(int8_block_count(values.size()));
    int low = -(1 << (bits - 1)), high = (1 << (bits - 1)) - 1;
    unsigned mask = (1u << bits) - 1;
    for (std::size_t block = 0; block < out.scales.size(); ++block) {
        std::size_t begin = block * kInt8BlockSize;
        std::size_t end = std::min(begin + kInt8BlockSize, values.size());
        float absmax = 0.0f;
        for (std::size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(values[i]));
        float scale = absmax / top_level(bits);
        out.scales[block] = scale;
        if (scale == 0.0f) continue;  // decodes to zeros whatever the codes; leave them 0
        float inverse = 1.0f / scale;
        for (std::size_t i = begin; i < end; ++i) {
            // The level nearest x / s among q + ½ is floor(x / s).
            int q = std::clamp(static_cast<int>(std::floor(values[i] * inverse)), low, high);
            auto shift = (i * static_cast<std::size_t>(bits)) % 8;
            out.packed[i * static_cast<std::size_t>(bits) / 8] |=
                static_cast<std::uint8_t>((static_cast<unsigned>(q) & mask) << shift);
        }
    }
    return out;
}

Result<std::vector<float>> dequantize_packed_blockwise(ByteView packed, std::span<const float> scales,
                                                       std::size_t count, int bits) {
    if (packed.size() != packed_byte_count(count, bits))
        return make_error("packed values: " + std::to_string(count) + " values of " + std::to_string(bits) +
                          " bits take " + std::to_string(packed_byte_count(count, bits)) + " bytes, not " +
                          std::to_string(packed.size()));
    if (scales.size() != int8_block_count(count))
        return make_error("packed values: need " + std::to_string(int8_block_count(count)) + " block scales");
    for (float scale : scales)
        if (!std::isfinite(scale) || scale < 0.0f) return make_error("packed values: a negative or non-finite scale");
    auto used_bits = (count * static_cast<std::size_t>(bits)) % 8;
    if (used_bits != 0 && (packed.back() >> used_bits) != 0)
        return make_error("packed values: padding bits after the last value are not 0");
    std::vector<float> values(count);
    unsigned mask = (1u << bits) - 1;
    int sign_bit = 1 << (bits - 1);
    for (std::size_t i = 0; i < count; ++i) {
        auto shift = (i * static_cast<std::size_t>(bits)) % 8;
        int code = static_cast<int>((packed[i * static_cast<std::size_t>(bits) / 8] >> shift) & mask);
        int q = code >= sign_bit ? code - (1 << bits) : code;
        float scale = scales[i / kInt8BlockSize];
        values[i] = scale * (static_cast<float>(q) + 0.5f);
    }
    return values;
}

}  // namespace tessera::common
