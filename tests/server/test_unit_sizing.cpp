// Units sized to the fleet (server/core/unit_sizing.h): steps in proportion to speed when units
// end together, H lowered as the fleet grows so each volunteer keeps its rounds, and the
// task settings that turn both on.
#include <doctest/doctest.h>

#include "task_config.h"
#include "unit_sizing.h"

using namespace tessera;
using namespace tessera::server;

namespace {

TaskConfig sized_task() {
    TaskConfig config;
    config.local_steps = 50;
    config.batch_size = 64;
    config.target_seconds = 120;
    return config;
}

common::LrSchedule constant_over(std::int64_t samples) {
    common::LrSchedule schedule;
    schedule.total_samples = samples;
    return schedule;
}

}  // namespace

TEST_CASE("units that end together: steps in proportion to speed, the fastest gets H") {
    auto config = sized_task();
    config.units_end_together = true;
    const FleetNow fleet{8, 100.0};
    CHECK(unit_local_steps(config, fleet, 100) == 50);
    CHECK(unit_local_steps(config, fleet, 50) == 25);
    CHECK(unit_local_steps(config, fleet, 25) == 13);  // 12.5 rounds half up
    CHECK(unit_local_steps(config, fleet, 8) == 4);    // a GTX 1660 beside an RTX 4090
    CHECK(unit_local_steps(config, fleet, 1) == 1);    // no H/8 floor: the share holds to one step
    CHECK(unit_local_steps(config, fleet, 400) == 50);  // faster than any known: H
    CHECK(unit_local_steps(config, fleet, 0) == 12);    // not measured yet: a warm-up unit
    // Without it, the H/8 floor stands and the time alone sizes slower volunteers' units.
    config.units_end_together = false;
    CHECK(unit_local_steps(config, fleet, 8) == 15);  // 120 s × 8/s ÷ 64
    CHECK(unit_local_steps(config, fleet, 1) == 6);
}

TEST_CASE("target seconds still caps a unit's duration; no fastest known means the volunteer's own time") {
    auto config = sized_task();
    config.units_end_together = true;
    config.target_seconds = 10;
    CHECK(unit_local_steps(config, FleetNow{8, 100.0}, 100) == 16);  // 10 s × 100/s ÷ 64 = 15.6
    config.target_seconds = 120;
    CHECK(unit_local_steps(config, FleetNow{8, 0.0}, 16) == 30);  // as if it were the fastest
    config.target_seconds = 0;                                     // units not sized: every one H
    CHECK(unit_local_steps(config, FleetNow{8, 100.0}, 8) == 50);
}

TEST_CASE("H falls as the fleet grows, so each volunteer keeps min_rounds units over the schedule") {
    auto config = sized_task();
    config.lr_schedule = constant_over(240000);
    config.min_rounds = 20;
    CHECK(most_local_steps(config, FleetNow{1, 0}) == 50);  // 187 by the rounds: the task's H bounds it
    CHECK(most_local_steps(config, FleetNow{8, 0}) == 23);  // 240 000 / (20 × 8 × 64) = 23.4
    CHECK(most_local_steps(config, FleetNow{64, 0}) == 2);
    CHECK(most_local_steps(config, FleetNow{100000, 0}) == 1);
    for (std::int64_t c = 1; c <= 200; ++c) {
        auto most = most_local_steps(config, FleetNow{c, 0});
        CAPTURE(c);
        CHECK(most >= 1);
        CHECK(most <= config.local_steps);
        if (most > 1) CHECK(240000 / (c * most * config.batch_size) >= config.min_rounds);
    }
    // Every unit obeys the lowered H: fixed units, sized ones, and a warm-up.
    config.target_seconds = 0;
    CHECK(unit_local_steps(config, FleetNow{8, 0}, 100) == 23);
    config.target_seconds = 120;
    config.units_end_together = true;
    CHECK(unit_local_steps(config, FleetNow{8, 100.0}, 100) == 23);
    CHECK(unit_local_steps(config, FleetNow{8, 100.0}, 50) == 12);  // 11.5 rounds half up
    CHECK(unit_local_steps(config, FleetNow{8, 100.0}, 0) == 5);
}

TEST_CASE("the scheduler reads the fleet only for a task sized by it") {
    auto config = sized_task();
    CHECK_FALSE(sizing_reads_fleet(config));
    config.units_end_together = true;
    CHECK(sizing_reads_fleet(config));
    config.target_seconds = 0;
    CHECK_FALSE(sizing_reads_fleet(config));
    config.min_rounds = 20;
    CHECK_FALSE(sizing_reads_fleet(config));  // no schedule: nothing to divide
    config.lr_schedule = constant_over(240000);
    CHECK(sizing_reads_fleet(config));
    // With no schedule a min_rounds changes nothing.
    config.lr_schedule.reset();
    CHECK(most_local_steps(config, FleetNow{64, 0}) == 50);
}
