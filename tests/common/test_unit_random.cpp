// The unit's random streams (docs/protocol.md, "Randomness"): reference figures computed by a
// separate implementation of the specification (Python integers, written from the doc), and
// the distributions and permutations being what they claim.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "unit_random.h"

using namespace tessera::common;

TEST_CASE("the streams match the specification's reference figures") {
    CHECK(splitmix64_mix(0) == 0);
    CHECK(splitmix64_mix(1) == 0x5692161d100b05e5ULL);
    CHECK(UnitStream(0, DrawPurpose::BatchOrder, 0).key() == 0x7ab40e090f363a7dULL);

    UnitStream order(1234567, DrawPurpose::BatchOrder, 0);
    CHECK(order.key() == 0xac35fca902bc2737ULL);
    CHECK(order.word(0) == 0xc85c9bed8f9d012eULL);
    CHECK(order.word(1) == 0x13d8d703c3ef5e02ULL);
    CHECK(order.word(2) == 0x5c3067eea193f084ULL);
    CHECK(order.uniform(0) == 0.7826631026251682);
    CHECK(order.uniform(1) == 0.07752746431282043);
    CHECK(order.uniform(2) == 0.3601136167140593);

    auto normals = unit_normals(UnitStream(1234567, DrawPurpose::Noise, 7), 4);
    std::vector<float> expected{-1.709958553314209f, 1.2841335535049438f, 0.4644542634487152f, -1.1336884498596191f};
    CHECK(normals == expected);
    CHECK(static_cast<float>(UnitStream(1234567, DrawPurpose::Noise, 7).normal(3)) == expected[3]);

    CHECK(unit_permutation(UnitStream(1234567, DrawPurpose::BatchOrder, 2), 10) ==
          std::vector<std::int64_t>{8, 2, 5, 7, 6, 0, 3, 9, 1, 4});
    CHECK(unit_below(UnitStream(42, DrawPurpose::DropoutMask, 0), 16, 0.25) ==
          std::vector<std::uint8_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0});
}

TEST_CASE("purposes, steps and seeds give independent streams") {
    UnitStream a(7, DrawPurpose::Noise, 0), b(7, DrawPurpose::Noise, 1), c(7, DrawPurpose::Timestep, 0),
        d(8, DrawPurpose::Noise, 0);
    CHECK(a.key() != b.key());
    CHECK(a.key() != c.key());
    CHECK(a.key() != d.key());
    CHECK(a.word(0) == UnitStream(7, DrawPurpose::Noise, 0).word(0));  // a function of its key and index only
}

TEST_CASE("uniforms, normals and permutations have the distributions they claim") {
    UnitStream stream(99, DrawPurpose::Noise, 3);
    constexpr std::size_t kCount = 200000;
    double sum = 0, squares = 0;
    for (float v : unit_normals(stream, kCount)) {
        sum += v;
        squares += static_cast<double>(v) * v;
    }
    CHECK(std::abs(sum / kCount) < 0.01);                  // standard error 0.0022
    CHECK(std::abs(squares / kCount - 1.0) < 0.015);       // standard error 0.0032
    auto below = unit_below(stream, kCount, 0.25);
    double share = static_cast<double>(std::count(below.begin(), below.end(), 1)) / kCount;
    CHECK(std::abs(share - 0.25) < 0.005);                 // standard error 0.001

    auto order = unit_permutation(UnitStream(5, DrawPurpose::BatchOrder, 0), 1000);
    auto sorted = order;
    std::sort(sorted.begin(), sorted.end());
    for (std::int64_t i = 0; i < 1000; ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
    CHECK(order != sorted);
    CHECK(unit_permutation(stream, 0).empty());
    CHECK(unit_permutation(stream, 1) == std::vector<std::int64_t>{0});
}
