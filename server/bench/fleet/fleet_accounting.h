// The fleet simulator's account of a run from the server's store: what became of every unit it
// issued (merged, refused and why, timed out, walked away from), the results the contribution
// checks saw, and the timed-out units handed out again.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "fleet_run.h"
#include "result.h"
#include "store.h"

namespace tessera::bench {

// An issued assignment, tracked until its fate is known.
struct Issued {
    std::string attack;
    std::int64_t samples = 0;
    std::int64_t local_steps = 0;
    double seconds = 0;             // volunteer time the unit took (so far)
    std::string fate;               // set by the simulator itself: "left_mid_unit"
    std::int64_t base_version = 0;  // as issued (a failed unit is rebased when sent again)
};

// The outcomes, attacks' refusals and checked results of `result`. The store must hold exactly
// the assignments in `issued`.
common::Status account_outcomes(server::Store& store, const std::map<std::string, Issued>& issued, RunResult& result);

}  // namespace tessera::bench
