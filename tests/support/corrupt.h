// LevelDB-style damage for reader tests: every truncation, and single-byte flips.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::testing {

using Buffer = std::vector<std::uint8_t>;

// Calls `check` with each proper prefix of `original` (lengths 0 .. size-1).
inline void for_each_truncation(const Buffer& original, const std::function<void(const Buffer&)>& check) {
    for (std::size_t length = 0; length < original.size(); ++length)
        check(Buffer(original.begin(), original.begin() + static_cast<std::ptrdiff_t>(length)));
}

// Calls `check` with `original` where byte i is XORed with `mask`, for every i (or every
// `stride`-th i on large buffers).
inline void for_each_flip(const Buffer& original, std::uint8_t mask,
                          const std::function<void(const Buffer&, std::size_t)>& check, std::size_t stride = 1) {
    for (std::size_t i = 0; i < original.size(); i += stride) {
        Buffer damaged = original;
        damaged[i] ^= mask;
        check(damaged, i);
    }
}

}  // namespace tessera::testing
