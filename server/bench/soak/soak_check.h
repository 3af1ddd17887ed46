// The soak's verdict, read from the server's database after the load has stopped: every
// upload the server acknowledged (the generator's acks file) was merged exactly once — its
// assignment merged into a version, and the versions' merged-result counts adding up to the
// merged assignments — or refused with a recorded reason; no hostile result was merged.
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>

#include "result.h"

namespace tessera::bench {

struct SoakCheckOptions {
    std::string database_url;
    std::filesystem::path acks;
    double wait_s = 120;  // how long results still being validated or merged may take to settle
};

struct SoakVerdict {
    std::int64_t acknowledged = 0;
    std::int64_t honest_merged = 0;
    std::int64_t hostile_refused = 0;
    std::map<std::string, std::int64_t> honest_refused;  // by reason
    std::int64_t hostile_merged = 0;                     // must be 0
    std::int64_t lost = 0;                               // acknowledged, then no merge and no refusal: must be 0
    std::int64_t unsettled = 0;                          // still in validation or merging at the end: must be 0
    // Waiting, legitimately, for what the stopped fleet no longer sends: a replica's twin, or
    // the rest of a fedbuff buffer (fewer than its size).
    std::int64_t awaiting_replicas = 0;
    std::int64_t in_merge_buffer = 0;
    std::int64_t buffer_size = 1;
    std::int64_t merged_assignments = 0;                 // the task's, all of them
    std::int64_t merged_in_versions = 0;                 // the sum of its versions' merged results: must equal the above
    std::string first_problem;

    bool passed() const {
        return hostile_merged == 0 && lost == 0 && unsettled == 0 && in_merge_buffer < buffer_size &&
               merged_assignments == merged_in_versions;
    }
};

// Waits up to `wait_s` for the acknowledged results to settle, then checks them; prints the
// checks to `out`.
common::Result<SoakVerdict> check_soak(const SoakCheckOptions& options, std::ostream& out);

}  // namespace tessera::bench
