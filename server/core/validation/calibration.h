// A task's trusted start: when the task is created, the server trains one unit itself (the
// task's hyperparameters, on the validation shard, from version 0) and keeps the norm per step
// of that delta, then a second unit from the first one's weights, and keeps the lower of the
// two units' gains per step (a fresh model's first unit crosses a transient later units do
// not repeat). Until enough volunteers' results have been accepted to set the
// norm bounds and the gain margin, they are set by this calibration, so the first results of
// the first volunteers cannot set the bar (docs/operations.md, "Validation").
#pragma once

#include <optional>
#include <string>

#include "store.h"

namespace tessera::server {

struct Calibration {
    // Per step at the full rate (common::full_rate_steps: its warm-up counts in part).
    double norm_per_step = 0;  // ‖Δ‖ / steps of the server's own unit
    double gain_per_step = 0;  // relative loss drop on the samples it trained on, per step: the lower unit's
    double first_gain_per_step = 0;  // the first unit's, from version 0 (0: not recorded)
    std::int64_t steps = 0;
};

common::Status save_calibration(SettingStore& store, const std::string& task_id, const Calibration& calibration);
// None for a task created before calibrations existed.
common::Result<std::optional<Calibration>> load_calibration(SettingStore& store, const std::string& task_id);

}  // namespace tessera::server
