// How many local steps a volunteer's unit gets: from the task's bounds, the volunteer's speed,
// the fastest active volunteer's speed and the number of volunteers at work (docs/operations.md,
// "Sizing units for a fleet"). Pure: the scheduler gathers the inputs.
#pragma once

#include <cstdint>

#include "task_config.h"

namespace tessera::server {

// The fleet at work on a task, as the scheduler last read it (run_pace.h).
struct FleetNow {
    std::int64_t concurrency = 1;        // volunteers issued a unit recently (at least 1)
    double fastest_samples_per_s = 0;    // the fastest of them, as they reported (0: none known)
};

// The most local steps any unit gets now: the task's H, lowered while the fleet is large so that
// each volunteer still gets `min_rounds` units over the schedule's samples:
// ⌊schedule samples / (min_rounds × concurrency × batch)⌋, at least 1. The task's H when it sets
// no min_rounds, or no schedule with a total.
std::int64_t most_local_steps(const TaskConfig& config, const FleetNow& fleet);

// The steps of one volunteer's unit. Units not sized (target_seconds 0): the most. A volunteer of
// unknown speed: a warm-up unit, a quarter of the most. Otherwise about target_seconds of its
// work, and with units_end_together no more than its share of the fastest volunteer's unit
// (steps ∝ speed, so units end together: DyLU); within [1 (or the most / 8 without
// units_end_together), the most].
std::int64_t unit_local_steps(const TaskConfig& config, const FleetNow& fleet, double samples_per_s);

// Whether the scheduler needs FleetNow to size units of this task (it costs a store read).
bool sizing_reads_fleet(const TaskConfig& config);

}  // namespace tessera::server
