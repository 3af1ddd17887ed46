// The inner learning-rate schedule of a task: one warm-up and one decay over the whole run,
// indexed by samples merged, so that a volunteer's unit continues where the fleet stands
// instead of warming up afresh (DiLoCo, arXiv 2311.08105, runs one warm-up + cosine schedule
// across rounds). Pure arithmetic, no torch: the trainer, the central and data-parallel
// baselines and the tests share it.
//
// A unit covers the run's positions `from` → `to` (samples merged when it was issued, and
// where the fleet should be when it returns). Its step s of H is at
//   p_s = from + (to − from)·s/H,
// and trains with lr·f(p_s), where, with W = warmup_samples, T = total_samples, r =
// final_lr_ratio and B the batch,
//   f(p) = min(1, (p + B)/W)·g(p),   g = 1 (constant), or for cosine
//   g(p) = r + (1 − r)·½·(1 + cos(π·clamp((p − W)/(T − W), 0, 1))).
// W = 0 means no warm-up. Beyond T a cosine schedule stays at r.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "result.h"

namespace tessera::common {

struct LrSchedule {
    enum class Kind { Constant, Cosine };
    Kind kind = Kind::Constant;
    std::int64_t warmup_samples = 0;
    std::int64_t total_samples = 0;  // cosine: where the decay ends (> warmup_samples)
    double final_lr_ratio = 0.1;     // cosine: r in [0, 1]

    bool operator==(const LrSchedule&) const = default;
};

std::string_view lr_schedule_kind_name(LrSchedule::Kind kind);  // "constant", "cosine"
std::optional<LrSchedule::Kind> lr_schedule_kind_from_name(std::string_view name);

// Named errors: warm-up ≥ 0; for cosine total > warm-up and the ratio in [0, 1]; every count
// at most 2^53 (exact in a double and in JSON).
Status validate_lr_schedule(const LrSchedule& schedule);

// f(p) for a position p (samples merged) and the unit's batch size.
double lr_factor(const LrSchedule& schedule, double position, std::int64_t batch_size);

// p_s of step `step` of a unit of `steps` steps spanning from → to (from when steps ≤ 0).
double unit_position(std::int64_t from, std::int64_t to, std::int64_t step, std::int64_t steps);

// Where a unit stands on the run's schedule and on its own warm-up: what its steps' learning
// rates are as shares of the task's.
struct UnitRate {
    std::optional<LrSchedule> schedule;  // none: the task's rate throughout
    std::int64_t from = 0;               // the unit's span of the schedule
    std::int64_t to = 0;
    std::int64_t steps = 0;
    std::int64_t batch_size = 1;
    std::int64_t warmup_steps = 0;  // the unit's own linear warm-up (kept moments: none)
};

// Step `step`'s learning rate as a share of the task's: f(p_step) (1 without a schedule) times
// min(1, (step + 1)/warmup_steps).
double step_lr_share(const UnitRate& unit, std::int64_t step);

// The sum of the shares over the unit's steps: the steps it trains at the task's full rate.
// An AdamW step moves the weights in proportion to its rate, so the contribution checks judge
// norms and gains per such step: a unit in the run's warm-up and one at the full rate are then
// comparable (docs/operations.md, "Validation").
double full_rate_steps(const UnitRate& unit);

}  // namespace tessera::common
