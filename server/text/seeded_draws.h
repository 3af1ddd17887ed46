// Seeded random draws for `prepare canvases` (which items, where, which words) and for the
// stand-in text encoder's weights: SplitMix64 (common/unit_random.h) over a key made from a
// seed and a stream number, so that a dataset is the same on every platform and compiler
// (unlike std:: distributions, whose arithmetic the standard leaves open). Not thread-safe.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "unit_random.h"

namespace tessera::data {

class SeededDraws {
public:
    // word(i) = mix(key + (i + 1) · 0x9E3779B97F4A7C15) with key = mix(mix(seed) ^ stream).
    SeededDraws(std::uint64_t seed, std::uint64_t stream)
        : key_(common::splitmix64_mix(common::splitmix64_mix(seed) ^ stream)) {}

    std::uint64_t next() { return common::splitmix64_mix(key_ + ++count_ * 0x9E3779B97F4A7C15ULL); }

    // ⌊word · n / 2^64⌋: uniform in [0, n) for n ≥ 1.
    std::int64_t below(std::int64_t n) {
        return static_cast<std::int64_t>((static_cast<unsigned __int128>(next()) * static_cast<std::uint64_t>(n)) >>
                                         64);
    }

    // In [0, 1), exact in a double.
    double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }

    // Box–Muller, one value per two words: √(−2 ln(1 − u₁)) · cos(2π u₂).
    double normal() {
        double u1 = uniform(), u2 = uniform();
        return std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(2.0 * std::numbers::pi * u2);
    }

private:
    std::uint64_t key_;
    std::uint64_t count_ = 0;
};

}  // namespace tessera::data
