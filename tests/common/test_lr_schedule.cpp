// The run-wide learning-rate schedule: warm-up, cosine decay and its floor, positions within
// a unit, a unit's steps at the full rate, and the named errors of a bad schedule.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <string>

#include "lr_schedule.h"

using namespace tessera::common;

namespace {

LrSchedule cosine(std::int64_t warmup, std::int64_t total, double ratio) {
    return {LrSchedule::Kind::Cosine, warmup, total, ratio};
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("warm-up rises linearly to 1 at W, from B/W at the first step") {
    LrSchedule s{LrSchedule::Kind::Constant, 6400, 0, 0.1};
    CHECK(lr_factor(s, 0, 64) == doctest::Approx(0.01));
    CHECK(lr_factor(s, 64 * 4, 64) == doctest::Approx(5.0 / 100));
    CHECK(lr_factor(s, 6400 - 64, 64) == doctest::Approx(1.0));
    CHECK(lr_factor(s, 1e9, 64) == 1.0);
    // The per-unit warm-up of W/B steps, step k at (k + 1)/(W/B), is the same curve at p = k·B.
    for (int k = 0; k < 100; ++k) CHECK(lr_factor(s, k * 64.0, 64) == doctest::Approx(std::min(1.0, (k + 1) / 100.0)));
    LrSchedule none{};
    CHECK(lr_factor(none, 0, 64) == 1.0);
}

TEST_CASE("cosine: 1 at the end of warm-up, r at T and beyond, the midpoint halfway") {
    auto s = cosine(1000, 11000, 0.1);
    CHECK(lr_factor(s, 1000, 1) == doctest::Approx(1.0));
    CHECK(lr_factor(s, 6000, 1) == doctest::Approx(0.1 + 0.9 * 0.5));
    CHECK(lr_factor(s, 11000, 1) == doctest::Approx(0.1));
    CHECK(lr_factor(s, 1e12, 1) == doctest::Approx(0.1));
    const double quarter = 0.1 + 0.9 * 0.5 * (1 + std::cos(std::numbers::pi * 0.25));
    CHECK(lr_factor(s, 3500, 1) == doctest::Approx(quarter));
    // Within the warm-up both factors apply.
    CHECK(lr_factor(s, 499, 1) == doctest::Approx(0.5));
    // Decreasing after the warm-up.
    double last = 2;
    for (double p = 1000; p <= 11000; p += 500) {
        CHECK(lr_factor(s, p, 1) < last + 1e-12);
        last = lr_factor(s, p, 1);
    }
    // No warm-up: the decay starts at p = 0 with f = 1.
    CHECK(lr_factor(cosine(0, 100, 0), 0, 8) == doctest::Approx(1.0));
    CHECK(lr_factor(cosine(0, 100, 0), 100, 8) == doctest::Approx(0.0));
}

TEST_CASE("a unit's steps interpolate from → to") {
    CHECK(unit_position(1000, 2000, 0, 10) == 1000);
    CHECK(unit_position(1000, 2000, 5, 10) == 1500);
    CHECK(unit_position(1000, 2000, 10, 10) == 2000);
    CHECK(unit_position(1000, 1000, 7, 10) == 1000);  // from = to: one position, a constant lr
    CHECK(unit_position(1000, 2000, 3, 0) == 1000);
}

TEST_CASE("schedule kinds by name") {
    CHECK(lr_schedule_kind_name(LrSchedule::Kind::Cosine) == "cosine");
    CHECK(lr_schedule_kind_from_name("constant") == LrSchedule::Kind::Constant);
    CHECK(lr_schedule_kind_from_name("cosine") == LrSchedule::Kind::Cosine);
    CHECK(!lr_schedule_kind_from_name("linear").has_value());
}

TEST_CASE("a bad schedule is a named error") {
    CHECK(validate_lr_schedule({}).ok());
    CHECK(validate_lr_schedule(cosine(100, 1000, 0.1)).ok());
    auto negative = validate_lr_schedule({LrSchedule::Kind::Constant, -1, 0, 0.1});
    REQUIRE(!negative.ok());
    CHECK(contains(negative.message(), "warmup_samples"));
    auto short_total = validate_lr_schedule(cosine(100, 100, 0.1));
    REQUIRE(!short_total.ok());
    CHECK(contains(short_total.message(), "total_samples must exceed warmup_samples"));
    auto ratio = validate_lr_schedule(cosine(0, 100, 1.5));
    REQUIRE(!ratio.ok());
    CHECK(contains(ratio.message(), "final_lr_ratio"));
    auto huge = validate_lr_schedule(cosine(0, (std::int64_t{1} << 53) + 1, 0.1));
    REQUIRE(!huge.ok());
    CHECK(contains(huge.message(), "2^53"));
}

TEST_CASE("a unit's steps at the full rate: its warm-up and the run's schedule over its span") {
    // No schedule, no warm-up: every step at the task's rate.
    CHECK(full_rate_steps({std::nullopt, 0, 0, 10, 32, 0}) == doctest::Approx(10));
    // A 4-step warm-up: 0.25 + 0.5 + 0.75 + 1 + 6 × 1.
    CHECK(full_rate_steps({std::nullopt, 0, 0, 10, 32, 4}) == doctest::Approx(8.5));
    CHECK(step_lr_share({std::nullopt, 0, 0, 10, 32, 4}, 1) == doctest::Approx(0.5));
    // The run's warm-up of 6 400 samples: a unit spanning 0 → 320 at batch 32 runs step s at
    // (32 s + 32)/6400, a unit past the warm-up at the full rate.
    LrSchedule warm{LrSchedule::Kind::Constant, 6400, 0, 0.1};
    CHECK(full_rate_steps({warm, 0, 320, 10, 32, 0}) == doctest::Approx(55.0 / 200));
    CHECK(full_rate_steps({warm, 6400, 6720, 10, 32, 0}) == doctest::Approx(10));
    // Both: the unit's warm-up times the schedule.
    CHECK(step_lr_share({warm, 0, 320, 10, 32, 2}, 0) == doctest::Approx(0.5 * 32 / 6400));
    CHECK(full_rate_steps({warm, 0, 0, 0, 32, 0}) == 0);
}
