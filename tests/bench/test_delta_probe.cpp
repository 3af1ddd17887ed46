// The module probe: each group's share of a delta's squared norm, the class embedding split into
// class rows and the null row, and the cosine with the sum of the deltas recorded before it.
#include <doctest/doctest.h>

#include <cmath>

#include "delta_probe.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// A small DiT-like delta: a class embedding of 2 classes + null (hidden 2), one block, a head.
common::NamedTensors delta_of(std::vector<float> classes_and_null, std::vector<float> block, std::vector<float> head) {
    return {{"blocks.0.qkv.weight", {static_cast<std::int64_t>(block.size())}, block},
            {"class_embed.weight", {3, 2}, classes_and_null},
            {"out.bias", {static_cast<std::int64_t>(head.size())}, head}};
}

const ModuleProbe& group_of(const ProbedDelta& delta, const std::string& group) {
    for (const auto& m : delta.modules)
        if (m.group == group) return m;
    FAIL("no group " << group);
    return delta.modules.front();
}

}  // namespace

TEST_CASE("parameters fall into module groups, the class embedding into class rows and the null row") {
    auto slices = group_slices({"class_embed.weight", {11, 4}, std::vector<float>(44)});
    REQUIRE(slices.size() == 2);
    CHECK(slices[0].group == "class_embed.classes");
    CHECK(slices[0].end == 40);
    CHECK(slices[1].group == "class_embed.null");
    CHECK(slices[1].begin == 40);
    CHECK(slices[1].end == 44);
    CHECK(group_slices({"blocks.12.fc1.weight", {2}, {0, 0}})[0].group == "blocks.12");
    CHECK(group_slices({"t_fc1.bias", {2}, {0, 0}})[0].group == "t_fc1");
    CHECK(group_slices({"final_table", {2}, {0, 0}})[0].group == "final_table");
}

TEST_CASE("a delta's shares of its squared norm by group, and its alignment with the recent deltas") {
    DeltaProbe probe(2);
    // Squared norms: classes 1 + 1 = 2, null 4, block 9 + 0 = 9, head 0 (of 15).
    probe.record(delta_of({1, 0, 0, 1, 2, 0}, {3, 0}, {0}), 4, 50);
    const auto& first = probe.deltas().at(0);
    CHECK(first.base_version == 4);
    CHECK(first.local_steps == 50);
    CHECK(group_of(first, "class_embed.classes").share == doctest::Approx(2.0 / 15));
    CHECK(group_of(first, "class_embed.null").share == doctest::Approx(4.0 / 15));
    CHECK(group_of(first, "blocks.0").share == doctest::Approx(9.0 / 15));
    CHECK(group_of(first, "out").share == 0);
    CHECK_FALSE(group_of(first, "blocks.0").alignment.has_value());  // nothing before it

    // The block agrees with the first delta, the class rows point the other way, the null row
    // is orthogonal to it.
    probe.record(delta_of({-1, 0, 0, -1, 0, 3}, {1, 0}, {1}), 5, 50);
    const auto& second = probe.deltas().at(1);
    CHECK(*group_of(second, "blocks.0").alignment == doctest::Approx(1.0));
    CHECK(*group_of(second, "class_embed.classes").alignment == doctest::Approx(-1.0));
    CHECK(*group_of(second, "class_embed.null").alignment == doctest::Approx(0.0));
    CHECK_FALSE(group_of(second, "out").alignment.has_value());  // the first delta's head was zero

    // Against the sum of the window (the two before): block (3,0)+(1,0) against (0,1) is 0;
    // after the window moves on, only the last two count.
    probe.record(delta_of({0, 0, 0, 0, 0, 0}, {0, 1}, {1}), 6, 50);
    CHECK(*group_of(probe.deltas().at(2), "blocks.0").alignment == doctest::Approx(0.0));
    probe.record(delta_of({0, 0, 0, 0, 0, 0}, {1, 1}, {1}), 7, 50);
    // Window: (1,0) + (0,1) = (1,1): cosine 1 (the first delta's (3,0) has left it).
    CHECK(*group_of(probe.deltas().at(3), "blocks.0").alignment == doctest::Approx(1.0));

    auto summary = summarize_probes(probe.deltas());
    REQUIRE(summary.size() == 4);
    CHECK(summary[0].group == "blocks.0");
    CHECK(summary[0].deltas == 4);
    REQUIRE(summary[0].median_alignment.has_value());
    CHECK(*summary[0].median_alignment == doctest::Approx(1.0));  // of 1, 0, 1
}
