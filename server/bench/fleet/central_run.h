// The baselines of one worker training continuously with one AdamW state on the whole training
// set, for the same samples budget:
//   `central`: the task's batch, at the fleet's median speed — the per-sample ideal;
//   `ddp`: the fleet's combined batch K × B at the fleet's combined speed — synchronous data
//   parallelism with free communication, the ceiling of any data-parallel method at equal
//   samples. Its learning rate is √K × the task's (the square-root rule for Adam, Malladi et
//   al. 2022) unless given; warm-up keeps its steps.
// Virtual time runs with no communication.
#pragma once

#include <vector>

#include "fleet_run.h"
#include "fleet_sim.h"
#include "fleet_spec.h"
#include "task_config.h"

namespace tessera::bench {

// Uses the settings' budget, curve points, evaluation samples, seed and threads.
common::Result<RunResult> run_central(const server::TaskConfig& config, double samples_per_s,
                                      const SimSettings& settings);

// `ddp` for `fleet`: run_central with batch K·B, learning rate `lr` (≤ 0: √K × config.lr), at the
// sum of the volunteers' speeds. The result counts K volunteers.
common::Result<RunResult> run_ddp(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet, double lr,
                                  const SimSettings& settings);

}  // namespace tessera::bench
