// The `central` baseline: one worker training continuously with one AdamW state on the whole
// training set, for the same samples budget — the per-sample ideal a fleet is measured against.
// Its virtual time runs at the fleet's median speed with no communication.
#pragma once

#include "fleet_run.h"
#include "fleet_sim.h"
#include "task_config.h"

namespace tessera::bench {

// Uses the settings' budget, curve points, evaluation samples, seed and threads.
common::Result<RunResult> run_central(const server::TaskConfig& config, double samples_per_s,
                                      const SimSettings& settings);

}  // namespace tessera::bench
