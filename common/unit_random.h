// The random draws of a work unit, specified so that a volunteer in any language can
// reproduce a unit exactly (docs/protocol.md, "Randomness"): a counter-based generator —
// SplitMix64's output function over a key made from the unit's seed, the draw's purpose and
// its step — and the exact arithmetic that turns its 64-bit words into uniform numbers,
// normal numbers and permutations. No torch here: the trainer fills tensors from these.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::common {

// The name of this specification, which every work unit carries (`random`).
inline constexpr const char* kUnitRandomSpec = "tessera-splitmix64-1";

// What a stream of draws is for; its number is part of the key.
enum class DrawPurpose : std::uint64_t {
    BatchOrder = 1,     // step = epoch: the permutation of the unit's rows
    Timestep = 2,       // DiT: z for t = sigmoid(z), one normal per sample
    Noise = 3,          // DiT: ε, one normal per value of the batch, row-major
    LabelDrop = 4,      // DiT: a sample's label becomes the null class when uniform < 0.1
    DropoutMask = 5,    // cnn: a value before fc1 is kept when uniform ≥ 0.25
    CaptionDrop = 6,    // text DiT: a sample's caption becomes the null caption when uniform < caption_drop
    PatchMask = 7,      // DiT with patch masking: the tokens each sample keeps (unit_kept_tokens)
};

// SplitMix64's finaliser: z ^= z >> 30; z *= 0xBF58476D1CE4E5B9; z ^= z >> 27;
// z *= 0x94D049BB133111EB; z ^= z >> 31 (all modulo 2^64).
std::uint64_t splitmix64_mix(std::uint64_t z);

// One stream of draws: word(i) = mix(key + (i + 1) · 0x9E3779B97F4A7C15), the i-th output of
// SplitMix64 started at `key`, where key = mix(mix(mix(seed) ^ purpose) ^ step).
class UnitStream {
public:
    UnitStream(std::uint64_t seed, DrawPurpose purpose, std::uint64_t step);

    std::uint64_t word(std::uint64_t i) const;
    // (word(i) >> 11) · 2^-53: in [0, 1), exact in a double.
    double uniform(std::uint64_t i) const;
    // Box–Muller over words 2⌊i/2⌋ and 2⌊i/2⌋ + 1: with u₁, u₂ their uniforms and
    // r = √(−2 ln(1 − u₁)), value i is r·cos(2πu₂) when i is even, r·sin(2πu₂) when odd.
    double normal(std::uint64_t i) const;
    std::uint64_t key() const { return key_; }

private:
    std::uint64_t key_;
};

// Fisher–Yates over 0 … n−1: for k = 0, 1, …, n−2 with i = n−1−k, j = ⌊word(k) · (i + 1) / 2^64⌋
// (the high word of the 128-bit product), swap positions i and j.
std::vector<std::int64_t> unit_permutation(const UnitStream& stream, std::int64_t n);

// Patch masking: the tokens a sample keeps when a fraction `ratio` in [0, 1) of its `tokens` is
// dropped: max(1, ⌊(1 − ratio) · tokens + 0.5⌋), computed in double.
std::int64_t kept_token_count(std::int64_t tokens, double ratio);
// The tokens each of `rows` samples keeps, rows × kept, row-major: for sample r, the Fisher–Yates
// permutation of 0 … tokens−1 above made with words r·(tokens − 1) + k in place of word(k), and of
// it the first `kept` entries, sorted ascending.
std::vector<std::int64_t> unit_kept_tokens(const UnitStream& stream, std::int64_t rows, std::int64_t tokens,
                                           std::int64_t kept);

// For i = 0 … count−1: 1 where uniform(i) < threshold (compared in double), else 0.
std::vector<std::uint8_t> unit_below(const UnitStream& stream, std::size_t count, double threshold);
// normal(0) … normal(count − 1), each rounded to f32.
std::vector<float> unit_normals(const UnitStream& stream, std::size_t count);

}  // namespace tessera::common
