// The statistics the contribution checks judge by: the paired comparison of per-sample losses
// (its arithmetic, and that it refuses only what the spread cannot explain), and the
// alignment check's consensus (warm-up units never form it; it ages by versions and time, and
// restarts) and threshold.
#include <doctest/doctest.h>

#include <random>

#include "copy_detector.h"
#include "paired_losses.h"
#include "result_checks.h"

using namespace tessera;
using namespace tessera::server;

namespace {

std::vector<double> normal_values(std::size_t n, double mean, double sd, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal(mean, sd);
    std::vector<double> values(n);
    for (auto& v : values) v = normal(rng);
    return values;
}

// A sketch of a random direction (`seed`) with a share `common` of a fixed one.
DeltaSketch direction(std::uint32_t seed, double common = 0, std::uint32_t common_seed = 12345) {
    common::NamedTensors tensors{{"w", {512}, std::vector<float>(512)}};
    std::mt19937 rng(seed), fixed(common_seed);
    std::normal_distribution<float> own, shared;  // one each: a distribution caches half its pairs
    for (auto& v : tensors[0].values) v = static_cast<float>(common) * shared(fixed) + own(rng);
    return sketch_of(tensors);
}

}  // namespace

TEST_CASE("paired change: the means, and the standard error of the mean difference") {
    auto change = paired_change({1.0, 2.0, 3.0, 4.0}, {1.5, 2.5, 3.0, 5.0}).value();
    CHECK(change.before == doctest::Approx(2.5));
    CHECK(change.after == doctest::Approx(3.0));
    CHECK(change.change() == doctest::Approx(0.5));
    // Differences 0.5, 0.5, 0, 1: sample sd √(0.5 / 3), standard error that over √4.
    CHECK(change.standard_error == doctest::Approx(std::sqrt(0.5 / 3) / 2));
    CHECK(change.low() == doctest::Approx(0.5 - kRefusalZ * change.standard_error));
    CHECK(change.high() == doctest::Approx(0.5 + kRefusalZ * change.standard_error));
    CHECK(paired_change({2.0}, {3.0}).value().standard_error == 0);

    CHECK(paired_change({1.0, 2.0}, {1.0}).message() == "paired losses: 2 samples before, 1 after");
    CHECK(paired_change({}, {}).message() == "paired losses: no samples");
}

TEST_CASE("paired change: per-sample noise far larger than the change is not evidence; a shift every sample shows is") {
    // Losses that differ a lot between samples, and a delta that moves each one by noise of
    // 30 % of the mean loss: the mean moves by several percent, by chance alone.
    auto before = normal_values(128, 1.0, 0.5, 1);
    auto jitter = normal_values(128, 0.0, 0.3, 2);
    std::vector<double> after(before.size());
    for (std::size_t i = 0; i < before.size(); ++i) after[i] = before[i] + jitter[i];
    auto noisy = paired_change(before, after).value();
    CHECK(noisy.low() < 0.1 * noisy.before);  // not refused at a 10 % tolerance

    // A 30 % increase on every sample, with the same jitter, is beyond doubt.
    for (std::size_t i = 0; i < before.size(); ++i) after[i] = 1.3 * before[i] + jitter[i];
    auto worse = paired_change(before, after).value();
    CHECK(worse.low() > 0.1 * worse.before);
}

TEST_CASE("paired change: honest noise is refused at about the stated rate, no more") {
    // 2000 honest deltas whose true change is exactly the tolerance's edge: refused ≤ 0.1 %
    // by design; with no true change, never.
    int at_edge = 0, unchanged = 0;
    for (std::uint32_t trial = 0; trial < 2000; ++trial) {
        auto before = normal_values(128, 1.0, 0.4, 3 * trial + 7);
        auto jitter = normal_values(128, 0.0, 0.2, 3 * trial + 8);
        std::vector<double> edge(before.size()), same(before.size());
        double mean = 0;
        for (double b : before) mean += b / static_cast<double>(before.size());
        for (std::size_t i = 0; i < before.size(); ++i) {
            same[i] = before[i] + jitter[i];
            edge[i] = same[i] + 0.1 * mean;
        }
        auto e = paired_change(before, edge).value();
        auto s = paired_change(before, same).value();
        at_edge += e.low() > 0.1 * e.before;
        unchanged += s.low() > 0.1 * s.before;
    }
    CHECK(at_edge <= 8);  // 0.1 % of 2000 is 2; the normal approximation at n = 128 allows a few
    CHECK(unchanged == 0);
}

TEST_CASE("the consensus: formed of at least 5 results of other units, never of warm-up units alone") {
    CopyDetector copies;
    auto probe = direction(100, 1.0);
    for (std::uint32_t i = 0; i < CopyDetector::kConsensusMinimum; ++i)
        copies.note_result("t", "wu-warm-" + std::to_string(i), direction(i, 1.0), {0, 0}, true);
    CHECK(!copies.consensus_alignment("t", "wu-x", probe, {1, 10}).has_value());
    for (std::uint32_t i = 0; i < CopyDetector::kConsensusMinimum - 1; ++i)
        copies.note_result("t", "wu-" + std::to_string(i), direction(10 + i, 1.0), {1, 5});
    CHECK(!copies.consensus_alignment("t", "wu-x", probe, {1, 10}).has_value());
    copies.note_result("t", "wu-last", direction(20, 1.0), {1, 5});
    auto aligned = copies.consensus_alignment("t", "wu-x", probe, {1, 10});
    REQUIRE(aligned.has_value());
    CHECK(*aligned > 0.3);
    // A unit's own replica is not part of the consensus it is judged by.
    CHECK(!copies.consensus_alignment("t", "wu-last", probe, {1, 10}).has_value());
    CHECK(*copies.consensus_alignment("t", "wu-x", direction(200), {1, 10}) < 0.2);  // unrelated direction
}

TEST_CASE(
    "a warm-up unit is judged by the other warm-up units' consensus while five are current, else by the others'") {
    // Warm-up units share one direction, full units another (Adam's first steps at a warm-up
    // rate, on version 0, against full units on later versions).
    CopyDetector copies;
    constexpr std::uint32_t kWarmUpDirection = 777;
    for (std::uint32_t i = 0; i < CopyDetector::kConsensusMinimum; ++i)
        copies.note_result("t", "wu-full-" + std::to_string(i), direction(10 + i, 1.0), {3, 50});
    for (std::uint32_t i = 0; i < CopyDetector::kConsensusMinimum - 1; ++i)
        copies.note_result("t", "wu-warm-" + std::to_string(i), direction(i, 1.0, kWarmUpDirection), {0, 5}, true);
    auto late_warm_up = direction(100, 1.0, kWarmUpDirection);
    // Four other warm-up units: the full units judge it, and find it misaligned.
    CHECK(*copies.consensus_alignment("t", "wu-x", late_warm_up, {0, 96}, true) < 0.2);
    copies.note_result("t", "wu-warm-last", direction(20, 1.0, kWarmUpDirection), {0, 5}, true);
    CHECK(*copies.consensus_alignment("t", "wu-x", late_warm_up, {0, 96}, true) > 0.3);
    CHECK(*copies.consensus_alignment("t", "wu-x", direction(300), {0, 96}, true) < 0.2);  // noise
    // A full unit is judged by the full units alone; warm-up units are still compared for copies.
    CHECK(*copies.consensus_alignment("t", "wu-x", late_warm_up, {3, 96}) < 0.2);
    CHECK(copies.most_similar("t", "wu-x", direction(20, 1.0, kWarmUpDirection)).similarity > 0.999);
}

TEST_CASE("the consensus ages: by versions, by time, and from a restart") {
    CopyDetector copies;
    for (std::uint32_t i = 0; i < CopyDetector::kConsensusMinimum; ++i)
        copies.note_result("t", "wu-" + std::to_string(i), direction(i, 1.0), {10, 1000});
    auto probe = direction(100, 1.0);
    CHECK(copies.consensus_alignment("t", "wu-x", probe, {10 + CopyDetector::kConsensusVersions, 1000}).has_value());
    CHECK(!copies.consensus_alignment("t", "wu-x", probe, {11 + CopyDetector::kConsensusVersions, 1000}).has_value());
    CHECK(copies.consensus_alignment("t", "wu-x", probe, {10, 1000 + CopyDetector::kConsensusSeconds}).has_value());
    CHECK(!copies.consensus_alignment("t", "wu-x", probe, {10, 1001 + CopyDetector::kConsensusSeconds}).has_value());

    copies.restart_consensus("t", 1001);
    CHECK(!copies.consensus_alignment("t", "wu-x", probe, {10, 1002}).has_value());
    CHECK(copies.consensus_alignment("other task", "wu-x", probe, {10, 1002}) == std::nullopt);
    // Restarted results still count as copies: a replay of one is found.
    CHECK(copies.most_similar("t", "wu-x", direction(0, 1.0)).similarity > 0.999);
}

TEST_CASE("the alignment threshold: the task's setting, or well below what recent valid results show near a plateau") {
    CHECK(alignment_threshold({}, 0.1) == 0.1);
    CHECK(alignment_threshold({0.7, 0.8, 0.75, 0.72, 0.9}, 0.1) == 0.1);  // a young model: the setting
    // A cnn near its plateau (two volunteers, docs/benchmarks.md): honest cosines scatter around
    // 0.1; median 0.10, median absolute deviation 0.015, so 4½ robust spreads reach 0.0.
    std::vector<double> plateau{0.10, 0.115, 0.085, 0.12, 0.08, 0.10, 0.13, 0.07, 0.09, 0.11, 0.10};
    double threshold = alignment_threshold(plateau, 0.1);
    CHECK(threshold == doctest::Approx(0.10 - 4.5 * 1.4826 * 0.015));
    CHECK(threshold > -0.10);  // a sign-flipped typical result is refused
    // Near the plateau real clients reach within minutes at the new defaults: median 0.025,
    // absolute deviation 0.012. Honest results reach −0.06; so does a sign-flipped typical one.
    std::vector<double> real_plateau{0.025, 0.037, 0.013, 0.049, 0.001, 0.025, 0.030, 0.020, 0.060, -0.010, 0.028};
    threshold = alignment_threshold(real_plateau, 0.1);
    CHECK(threshold == doctest::Approx(0.025 - 4.5 * 1.4826 * 0.012));
    CHECK(threshold < -0.025);
    CHECK(alignment_threshold({0.05, 0.06, 0.04, 0.05}, 0.1) == 0.1);  // too few to go by
    CHECK(alignment_threshold(plateau, -1) == -1);                     // the check turned off stays off
    // Recent valid results that point away from the consensus (the model turned): the threshold
    // follows them.
    CHECK(alignment_threshold({-0.2, -0.1, -0.3, -0.15, -0.25}, 0.1) == doctest::Approx(-0.2 - 4.5 * 1.4826 * 0.05));
}
