// Counters the server keeps in memory for /metrics (Prometheus text format): request latency
// by route, bytes in and out, merge durations, the contribution checks' cost. Thread-safe:
// atomics only. The figures kept in
// the database (versions, work units, rejections) are read from the store when scraped.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "check_costs.h"
#include "records.h"
#include "state_dir.h"

namespace tessera::server {

// A Prometheus histogram with fixed upper bounds (seconds).
class Histogram {
public:
    static constexpr std::array<double, 12> kBounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                       0.1,   0.25,   0.5,   1,    2.5,   10};
    void observe(double seconds);
    // "_bucket{le=...}", "_sum" and "_count" lines for `name`, with `labels` ("" or `k="v"`).
    void write(std::ostream& out, std::string_view name, std::string_view labels) const;
    double sum_seconds() const { return static_cast<double>(sum_micros_.load()) * 1e-6; }

private:
    std::array<std::atomic<std::uint64_t>, kBounds.size() + 1> buckets_{};  // the last is +Inf
    std::atomic<std::uint64_t> count_{0};
    std::atomic<std::uint64_t> sum_micros_{0};
};

// Route groups that latency is labelled with: a bounded set, whatever the request's path (the
// route table says which group a route is in).
enum class RouteGroup { Volunteer, Blobs, Public, Events, Admin, Dashboard, Metrics, Other };
inline constexpr std::array<std::string_view, 8> kRouteGroupNames = {"volunteer", "blobs",     "public",  "events",
                                                                     "admin",     "dashboard", "metrics", "other"};

class ServerMetrics {
public:
    void observe_request(RouteGroup group, double seconds) {
        latency_[static_cast<std::size_t>(group)].observe(seconds);
    }
    void add_bytes_in(std::uint64_t bytes) { bytes_in_ += bytes; }
    void add_bytes_out(std::uint64_t bytes) { bytes_out_ += bytes; }
    void set_upload_bytes_in_flight(std::uint64_t bytes) { upload_bytes_in_flight_ = bytes; }
    std::uint64_t upload_bytes_in_flight() const { return upload_bytes_in_flight_.load(); }
    void count_upload_turned_away() { ++uploads_turned_away_; }
    void observe_merge(double seconds) { merge_.observe(seconds); }
    double merge_seconds() const { return merge_.sum_seconds(); }
    void count_commit_failure() { ++commit_failures_; }
    std::uint64_t commit_failures() const { return commit_failures_.load(); }
    void count_connection() { ++connections_; }
    std::uint64_t connections() const { return connections_.load(); }
    void count_request() { ++requests_; }
    std::uint64_t requests() const { return requests_.load(); }
    std::uint64_t bytes_in() const { return bytes_in_.load(); }
    std::uint64_t bytes_out() const { return bytes_out_.load(); }
    CheckCosts& checks() { return checks_; }
    const CheckCosts& checks() const { return checks_; }

    // The in-memory families, in exposition format.
    void write(std::ostream& out) const;

private:
    std::array<Histogram, kRouteGroupNames.size()> latency_;
    Histogram merge_;
    std::atomic<std::uint64_t> bytes_in_{0};
    std::atomic<std::uint64_t> bytes_out_{0};
    std::atomic<std::uint64_t> upload_bytes_in_flight_{0};
    std::atomic<std::uint64_t> uploads_turned_away_{0};
    std::atomic<std::uint64_t> requests_{0};
    std::atomic<std::uint64_t> connections_{0};
    std::atomic<std::uint64_t> commit_failures_{0};
    CheckCosts checks_;
};

// The events that record audits (docs/operations.md, "Replay audits", "Audit twins"): /metrics
// counts them, GET /api/v1/audits lists them.
inline const std::vector<std::string> kAuditEventKinds = {"audit_passed", "audit_failed", "audit_twin",
                                                          "credit_withdrawn"};

// What /metrics reads from the database.
struct StoredMetrics {
    std::int64_t model_version = 0;
    StoreCounts counts;
    std::map<std::string, std::int64_t> rejections_by_reason;
    std::map<std::string, std::int64_t> audit_events;      // by kind (kAuditEventKinds)
    std::map<std::string, std::int64_t> suspended_checks;  // tasks where each check is suspended, by reason
    std::int64_t seconds_without_merge = 0;                // the current task's, while results come back (liveness.h)
    bool stalled = false;
    StateUsage state;
    // The file system holding the state directory's blobs: its free and whole size (-1: unknown).
    std::int64_t disk_free_bytes = -1;
    std::int64_t disk_size_bytes = -1;
};

// The whole /metrics page: stored figures first, then the in-memory ones.
std::string prometheus_text(const StoredMetrics& stored, const ServerMetrics& metrics);

}  // namespace tessera::server
