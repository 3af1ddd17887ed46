// The commitment sketch: its specification by hand, name order, linearity, keying by the seed,
// and agreement to rounding.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "commitment_sketch.h"
#include "unit_random.h"

using namespace tessera::common;

namespace {

NamedTensors random_layout(std::uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gauss(0.0f, scale);
    NamedTensors tensors{{"b.weight", {3, 4}, {}}, {"a.bias", {5}, {}}};
    for (auto& t : tensors) {
        t.values.resize(static_cast<std::size_t>(t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1)));
        for (auto& v : t.values) v = gauss(rng);
    }
    return tensors;
}

}  // namespace

TEST_CASE("the sketch follows its specification: name order, keyed word, bucket and sign") {
    NamedTensors tensors{{"z", {2}, {1.5f, -2.0f}}, {"a", {1}, {0.25f}}};
    UnitStream stream(42, static_cast<DrawPurpose>(kCommitmentPurpose), 0);
    CommitmentSketch expected{};
    const float in_name_order[] = {0.25f, 1.5f, -2.0f};  // "a" before "z"
    for (std::uint64_t p = 0; p < 3; ++p) {
        auto word = stream.word(p);
        expected[word & 15] += (word >> 63 ? -1.0 : 1.0) * in_name_order[p];
    }
    CHECK(commitment_sketch(tensors, 42) == expected);
    // The tensors' order in the list does not matter; their names do.
    NamedTensors swapped{tensors[1], tensors[0]};
    CHECK(commitment_sketch(swapped, 42) == expected);
}

TEST_CASE("the sketch is linear, keyed by the seed, and about as long as the vector") {
    auto a = random_layout(1), b = random_layout(2);
    auto sum = a;
    for (std::size_t t = 0; t < sum.size(); ++t)
        for (std::size_t i = 0; i < sum[t].values.size(); ++i) sum[t].values[i] += b[t].values[i];
    auto sa = commitment_sketch(a, 7), sb = commitment_sketch(b, 7), ssum = commitment_sketch(sum, 7);
    CHECK(sketches_agree(ssum, add_sketches(sa, sb), 1e-6, sketch_length(ssum)));
    // Another seed, another projection.
    CHECK_FALSE(sketches_agree(commitment_sketch(a, 8), sa, 1e-3, sketch_length(sa)));
    // E[length²] = ‖v‖²: over many seeds the mean ratio is near 1.
    double norm_squared = 0;
    for (const auto& t : a)
        for (float v : t.values) norm_squared += static_cast<double>(v) * v;
    double ratio = 0;
    for (std::uint64_t seed = 0; seed < 400; ++seed) ratio += std::pow(sketch_length(commitment_sketch(a, seed)), 2);
    CHECK(ratio / 400 / norm_squared == doctest::Approx(1.0).epsilon(0.15));
}

TEST_CASE("agreement: within tolerance × scale, not beyond") {
    auto a = random_layout(3);
    auto nudged = a;
    nudged[0].values[0] += 1e-6f;
    auto sa = commitment_sketch(a, 9);
    auto scale = sketch_length(sa);
    CHECK(sketches_agree(sa, commitment_sketch(nudged, 9), 1e-5, scale));
    nudged[0].values[0] += 0.5f;
    CHECK_FALSE(sketches_agree(sa, commitment_sketch(nudged, 9), 1e-5, scale));
    CHECK(sketches_agree(sa, sa, 0, 0));
}
