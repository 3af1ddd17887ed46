// The soak's simulated volunteers (docs/benchmarks.md, "Soak"): thousands of registered keys
// served by a few dozen request threads from one schedule, each volunteer a small state
// machine — register, ask, "compute" for a random time, upload a made-up delta of the task's
// model — with a share that churns (leaves mid-unit, abandons or vanishes, comes back later)
// and a share that is hostile (deltas far too large, bad signatures, garbage bodies). Network
// failures and 5xx answers are retried as a real client would; every upload the server
// acknowledges goes into the SoakRecord.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "result.h"
#include "soak_record.h"

namespace tessera::bench {

struct SoakLoadOptions {
    std::vector<std::string> servers;  // base URLs; volunteers are spread over them
    std::int64_t volunteers = 2000;
    int connections = 32;       // request threads: requests in flight at once
    double minutes = 5;         // how long the load runs
    double unit_seconds = 60;   // mean time a volunteer spends on a unit
    double hostile_share = 0.05;
    double churn_share = 0.1;
    std::uint64_t seed = 1;
};

// Runs the fleet against the servers until `options.minutes` have passed.
common::Status run_soak_fleet(const SoakLoadOptions& options, SoakRecord& record);

}  // namespace tessera::bench
