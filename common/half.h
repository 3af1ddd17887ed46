// Conversions between f32 and the 16-bit floats stored in tensor files (IEEE f16, bfloat16).
#pragma once

#include <bit>
#include <cstdint>

namespace tessera::common {

// bfloat16 is the top half of an f32; round to nearest even, keep NaN a NaN.
inline std::uint16_t f32_to_bf16(float value) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>(bits >> 16 | 0x40);
    bits += 0x7fffu + (bits >> 16 & 1u);
    return static_cast<std::uint16_t>(bits >> 16);
}

inline float bf16_to_f32(std::uint16_t value) { return std::bit_cast<float>(static_cast<std::uint32_t>(value) << 16); }

inline float f16_to_f32(std::uint16_t h) {
    std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = h >> 10 & 0x1fu;
    std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0x1f)  // inf or NaN
        return std::bit_cast<float>(sign | 0x7f800000u | mantissa << 13);
    if (exponent == 0) {
        if (mantissa == 0) return std::bit_cast<float>(sign);
        // Subnormal: value = mantissa * 2^-24.
        float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
        return sign ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | (exponent + 112) << 23 | mantissa << 13);
}

// Round to nearest even; overflow becomes infinity, tiny values subnormals or zero.
inline std::uint16_t f32_to_f16(float value) {
    std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
    std::uint16_t sign = static_cast<std::uint16_t>(bits >> 16 & 0x8000u);
    std::uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65520: inf
    if (abs < 0x38800000u) {                        // below f16's smallest normal
        // Scale so the f16 subnormal step (2^-24) becomes 1, then round to nearest even.
        float scaled = std::bit_cast<float>(abs) * 16777216.0f;
        auto whole = static_cast<std::uint32_t>(scaled);
        float fraction = scaled - static_cast<float>(whole);
        if (fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) ++whole;
        return static_cast<std::uint16_t>(sign | whole);
    }
    std::uint32_t rounded = abs + 0xfffu + (abs >> 13 & 1u);
    return static_cast<std::uint16_t>(sign | (rounded - 0x38000000u) >> 13);
}

}  // namespace tessera::common
