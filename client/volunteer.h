// The volunteer's loop as a state machine: start (device, what earlier runs remembered) →
// connect (register, pin the server's key) → resume what the last run left → ask for work →
// fetch → train (with heartbeats) → upload → report, and back to asking. Network steps retry
// transient failures with backoff and give up on permanent ones; every way out is a Stop
// with its reason and message.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>
#include <string>

#include "retry.h"
#include "machine_sensors.h"
#include "volunteer_status.h"
#include "bytes.h"

namespace tessera::common {
class Logger;
}

namespace tessera::client {

struct VolunteerOptions {
    std::string server;  // URL
    std::filesystem::path state_dir;
    std::string device = "auto";
    int threads = 0;
    double max_gpu_memory_gb = 0;
    std::uint64_t cache_quota_bytes = 4 * common::kGiB;
    bool once = false;  // stop after one work unit
    std::string name = "volunteer";
    bool quiet = false;
    bool json_logs = false;
    std::filesystem::path ca_file;
    double max_download_mbps = 0;  // 0: no cap
    double max_upload_mbps = 0;
    std::chrono::milliseconds heartbeat_interval{30000};
    RetryPolicy retry;
    WorkPreferences preferences;                     // when the owner lets it work (docs/operations.md)
    std::shared_ptr<MachineSensors> sensors;         // null: this machine's (SystemSensors)
    std::chrono::milliseconds preference_interval{10000};  // between two readings of the sensors
    // Fetch the next unit while this one trains, once the training left is within this lead
    // plus twice the last unit's download time (client/look_ahead.h), and upload a result while
    // the next trains; 0: never (the default: the simulator found no time-to-loss gain at K = 8,
    // docs/operations.md, "Look-ahead"). Only while transfers took at least `look_ahead_share`
    // of the training time: a unit fetched ahead is based on an older model.
    std::chrono::milliseconds look_ahead_lead{0};
    double look_ahead_share = 0.1;
};

// Why the loop ended. Requested: the user asked (or the server could not be reached before
// they did); OnceDone: --once and a unit uploaded; Error: a permanent failure (refused,
// corrupt blobs, training failed under --once, the disk); Untrusted: the server's TLS
// certificate or key is not the trusted one, or a work unit's signature is bad.
enum class StopReason { Requested, OnceDone, Error, Untrusted };

struct Stop {
    StopReason reason = StopReason::Requested;
    std::string message;  // empty when there is nothing to add
};

// 0 for Requested and OnceDone, 1 for Error, 3 for Untrusted (docs/operations.md).
int exit_code(StopReason reason);

struct VolunteerControl {
    std::atomic<bool> stop_after_unit{false};  // first Ctrl-C; `tessera-client finish`
    std::atomic<bool> abandon_now{false};      // second Ctrl-C; `tessera-client quit`
    // `tessera-client pause`: training waits between steps, and no new unit is asked for.
    std::atomic<bool> paused{false};
    // A preference says wait (on battery, outside the work hours, …): the same waits as paused,
    // set by the client's PreferenceWatcher, never by a command.
    std::atomic<bool> held{false};
    VolunteerStatus status;  // what `tessera-client status` shows
    // Attached to several servers (run_volunteers): one board each, in the order given; `status`
    // then holds only the preferences and why they hold work.
    std::deque<VolunteerStatus> servers;
};

class PreferenceWatcher;
class RateLimiter;
class TurnTable;

// Holds `control` (`held`, and why on `control.status`) while `options.preferences` say wait,
// logging each change to `log`, until the watcher is destroyed.
std::unique_ptr<PreferenceWatcher> watch_preferences(const VolunteerOptions& options, VolunteerControl& control,
                                                     const common::Logger& log);

// A volunteer loop's place among several servers (run_volunteers): the turns it takes, its
// own status board and how its log lines name its server. Without one, a loop has the machine
// to itself and watches the preferences itself.
struct SharedMachine {
    TurnTable* turns = nullptr;
    std::size_t index = 0;
    VolunteerStatus* status = nullptr;
    std::string source;
    std::shared_ptr<RateLimiter> download_limit;  // the client's caps, for all its servers (null: none)
    std::shared_ptr<RateLimiter> upload_limit;
};

Stop run_volunteer(const VolunteerOptions& options, VolunteerControl& control, const SharedMachine* shared = nullptr);

}  // namespace tessera::client
