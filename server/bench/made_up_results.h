// The benchmarks' tasks take made-up deltas, the same few again and again: the contribution
// checks those would trip are turned off (the fleet simulator measures the checks on trained
// deltas).
#pragma once

#include "task_config.h"

namespace tessera::bench {

// Trusted volunteers, no replication, no copy, alignment or norm checks, no replay audits.
inline void accept_made_up_results(server::TaskConfig& config) {
    config.replication = 0;
    config.trust_streak = 0;
    config.copy_similarity = 1;
    config.min_alignment = -1;
    config.norm_floor = 0;
    config.norm_bound = 1e9;
    config.audit = 0;  // made-up results carry no commitments to replay
}

}  // namespace tessera::bench
