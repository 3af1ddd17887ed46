// What the soak's load generator writes down while it runs: every acknowledged upload (the
// list `soak-check` holds the server to), request latencies in one-minute windows, and how
// each kind of request ended. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::bench {

// Who sent an acknowledged result: an honest volunteer (it must be merged) or a hostile one
// (it must be refused with a reason).
enum class SenderRole { Honest, Hostile };

class SoakRecord {
public:
    // Appends to `acks` (one "wu_id client_id role" line per acknowledged result, flushed at
    // once so a killed generator loses none).
    explicit SoakRecord(const std::filesystem::path& acks);

    void acknowledged(const std::string& wu_id, const std::string& client_id, SenderRole role);
    // One request: `route` ("work", "upload", ...), how long it took, and how it ended ("ok",
    // "no_answer", "busy 503", "refused 409 conflict", ...), and for a failure the server's
    // message (the first one of each outcome is kept for the tally).
    void request(const std::string& route, double milliseconds, const std::string& outcome,
                 const std::string& message = {});
    // Something that is not a request to time: "churn: abandoned", "slow: closed by server".
    void count(const std::string& what);

    // latency.csv: minute, route, requests, p50, p99, max (ms), failures.
    void write_latency_csv(const std::filesystem::path& path) const;
    // The outcome and event counts, one "name count" per line.
    std::string tally() const;
    std::int64_t acknowledged_count() const;

private:
    struct Window {
        std::vector<double> milliseconds;
        std::int64_t failures = 0;
    };
    using Clock = std::chrono::steady_clock;

    mutable std::mutex mutex_;
    std::ofstream acks_;
    Clock::time_point started_ = Clock::now();
    std::map<std::pair<std::int64_t, std::string>, Window> windows_;  // (minute, route)
    std::map<std::string, std::int64_t> counts_;
    std::map<std::string, std::string> first_messages_;
    std::int64_t acknowledged_ = 0;
};

}  // namespace tessera::bench
