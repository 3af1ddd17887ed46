// The unit's random streams: SplitMix64 words and the conversions docs/protocol.md specifies.
#include "unit_random.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <numbers>

namespace tessera::common {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

// The two normals of words `pair` and `pair + 1` (pair even).
std::pair<double, double> box_muller(const UnitStream& stream, std::uint64_t pair) {
    double radius = std::sqrt(-2.0 * std::log(1.0 - stream.uniform(pair)));
    double angle = 2.0 * std::numbers::pi * stream.uniform(pair + 1);
    return {radius * std::cos(angle), radius * std::sin(angle)};
}

}  // namespace

std::uint64_t splitmix64_mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

UnitStream::UnitStream(std::uint64_t seed, DrawPurpose purpose, std::uint64_t step)
    : key_(splitmix64_mix(splitmix64_mix(splitmix64_mix(seed) ^ static_cast<std::uint64_t>(purpose)) ^ step)) {}

std::uint64_t UnitStream::word(std::uint64_t i) const { return splitmix64_mix(key_ + (i + 1) * kGolden); }

double UnitStream::uniform(std::uint64_t i) const {
    return static_cast<double>(word(i) >> 11) * 0x1.0p-53;
}

double UnitStream::normal(std::uint64_t i) const {
    auto [even, odd] = box_muller(*this, i & ~std::uint64_t{1});
    return (i & 1) == 0 ? even : odd;
}

namespace {

// Fisher–Yates over 0 … n−1 with words first_word + k.
std::vector<std::int64_t> permutation_from(const UnitStream& stream, std::int64_t n, std::uint64_t first_word) {
    std::vector<std::int64_t> order(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::int64_t>(i);
    for (std::uint64_t k = 0; k + 1 < order.size(); ++k) {
        auto i = order.size() - 1 - k;
        auto word = stream.word(first_word + k);
        auto j = static_cast<std::size_t>((static_cast<unsigned __int128>(word) * (i + 1)) >> 64);
        std::swap(order[i], order[j]);
    }
    return order;
}

}  // namespace

std::vector<std::int64_t> unit_permutation(const UnitStream& stream, std::int64_t n) {
    return permutation_from(stream, n, 0);
}

std::int64_t kept_token_count(std::int64_t tokens, double ratio) {
    auto kept = static_cast<std::int64_t>(std::floor((1.0 - ratio) * static_cast<double>(tokens) + 0.5));
    return std::clamp<std::int64_t>(kept, 1, std::max<std::int64_t>(tokens, 1));
}

std::vector<std::int64_t> unit_kept_tokens(const UnitStream& stream, std::int64_t rows, std::int64_t tokens,
                                           std::int64_t kept) {
    std::vector<std::int64_t> out;
    out.reserve(static_cast<std::size_t>(std::max<std::int64_t>(rows * kept, 0)));
    auto words_per_row = static_cast<std::uint64_t>(std::max<std::int64_t>(tokens - 1, 0));
    for (std::int64_t r = 0; r < rows; ++r) {
        auto order = permutation_from(stream, tokens, static_cast<std::uint64_t>(r) * words_per_row);
        order.resize(static_cast<std::size_t>(kept));
        std::sort(order.begin(), order.end());
        out.insert(out.end(), order.begin(), order.end());
    }
    return out;
}

std::vector<std::uint8_t> unit_below(const UnitStream& stream, std::size_t count, double threshold) {
    std::vector<std::uint8_t> below(count);
    for (std::size_t i = 0; i < count; ++i) below[i] = stream.uniform(i) < threshold ? 1 : 0;
    return below;
}

std::vector<float> unit_normals(const UnitStream& stream, std::size_t count) {
    std::vector<float> values(count);
    for (std::size_t pair = 0; pair < count; pair += 2) {
        auto [even, odd] = box_muller(stream, pair);
        values[pair] = static_cast<float>(even);
        if (pair + 1 < count) values[pair + 1] = static_cast<float>(odd);
    }
    return values;
}

}  // namespace tessera::common
