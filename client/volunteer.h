// The volunteer's loop: request → verify → fetch → train → encode → upload, with backoff on
// every network step, the current unit kept in the state directory so a restart resumes or
// abandons it, and a clean stop on request (finish the unit, or abandon it and say so).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "client_state.h"
#include "http_client.h"
#include "result.h"

namespace tessera::client {

struct VolunteerOptions {
    std::string server;  // URL
    std::filesystem::path state_dir;
    std::string device = "auto";
    int threads = 0;
    double max_gpu_memory_gb = 0;
    std::uint64_t cache_quota_bytes = std::uint64_t{4} << 30;
    bool once = false;  // stop after one work unit
    std::string name = "volunteer";
    bool quiet = false;
    bool json_logs = false;
    std::filesystem::path ca_file;
};

// Why the loop ended. Exit codes: 0 stopped/once done, 1 error, 3 the server's key is not
// the pinned one or a work unit's signature is bad.
enum class StopReason { Requested, OnceDone, Error, Untrusted };

struct VolunteerControl {
    std::atomic<bool> stop_after_unit{false};  // first Ctrl-C
    std::atomic<bool> abandon_now{false};      // second Ctrl-C
};

StopReason run_volunteer(const VolunteerOptions& options, VolunteerControl& control, std::string& message);

}  // namespace tessera::client
