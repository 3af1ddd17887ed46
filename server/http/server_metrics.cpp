// ServerMetrics and the /metrics page (Prometheus text exposition format 0.0.4).
#include "server_metrics.h"

#include <cmath>
#include <sstream>
#include <string>

#include "rejection_reasons.h"
#include "stall_guard.h"
#include "worker_guard.h"

namespace tessera::server {
namespace {

void family(std::ostream& out, std::string_view name, std::string_view type, std::string_view help) {
    out << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

}  // namespace

void Histogram::observe(double seconds) {
    if (!(seconds >= 0)) seconds = 0;  // NaN and clock steps backwards count as 0
    std::size_t i = 0;
    while (i < kBounds.size() && seconds > kBounds[i]) ++i;
    ++buckets_[i];
    ++count_;
    sum_micros_ += static_cast<std::uint64_t>(std::llround(seconds * 1e6));
}

void Histogram::write(std::ostream& out, std::string_view name, std::string_view labels) const {
    std::string prefix = labels.empty() ? "" : std::string(labels) + ",";
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i <= kBounds.size(); ++i) {
        cumulative += buckets_[i].load();
        out << name << "_bucket{" << prefix << "le=\"";
        if (i < kBounds.size())
            out << kBounds[i];
        else
            out << "+Inf";
        out << "\"} " << cumulative << '\n';
    }
    std::string braces = labels.empty() ? "" : "{" + std::string(labels) + "}";
    out << name << "_sum" << braces << ' ' << std::to_string(static_cast<double>(sum_micros_.load()) / 1e6) << '\n';
    out << name << "_count" << braces << ' ' << count_.load() << '\n';
}

void ServerMetrics::write(std::ostream& out) const {
    family(out, "tessera_http_requests_total", "counter", "HTTP requests answered.");
    out << "tessera_http_requests_total " << requests() << '\n';
    family(out, "tessera_http_connections_total", "counter",
           "HTTP connections accepted (a volunteer's requests share one while it keeps it alive).");
    out << "tessera_http_connections_total " << connections() << '\n';
    family(out, "tessera_http_request_duration_seconds", "histogram",
           "Time from a request's header to the end of its response, by route group.");
    for (std::size_t i = 0; i < latency_.size(); ++i)
        latency_[i].write(out, "tessera_http_request_duration_seconds",
                          "route=\"" + std::string(kRouteGroupNames[i]) + "\"");
    family(out, "tessera_http_received_bytes_total", "counter", "Bytes read from HTTP connections.");
    out << "tessera_http_received_bytes_total " << bytes_in() << '\n';
    family(out, "tessera_http_sent_bytes_total", "counter", "Bytes written to HTTP connections.");
    out << "tessera_http_sent_bytes_total " << bytes_out() << '\n';
    family(out, "tessera_upload_bytes_in_flight", "gauge",
           "Bytes of the upload bodies being received (their Content-Length), against --upload-spool.");
    out << "tessera_upload_bytes_in_flight " << upload_bytes_in_flight() << '\n';
    family(out, "tessera_uploads_turned_away_total", "counter",
           "Uploads answered 503 busy: the upload memory or the volunteer's share was taken.");
    out << "tessera_uploads_turned_away_total " << uploads_turned_away_.load() << '\n';
    family(out, "tessera_merge_duration_seconds", "histogram",
           "Time the aggregator spent on one accepted result (merge, checkpoint, commit).");
    merge_.write(out, "tessera_merge_duration_seconds", "");
    family(out, "tessera_commit_failures_total", "counter",
           "New model versions whose checkpoint or database row could not be written (then retried).");
    out << "tessera_commit_failures_total " << commit_failures() << '\n';
    family(out, "tessera_check_seconds_total", "counter", "Time the contribution checks spent, by stage.");
    std::pair<const char*, const std::atomic<double>*> stages[] = {{"decode", &checks_.decode},
                                                                   {"cheap", &checks_.cheap},
                                                                   {"copy", &checks_.copy},
                                                                   {"held_out", &checks_.held_out},
                                                                   {"own_samples", &checks_.own_samples},
                                                                   {"commitments", &checks_.commitments},
                                                                   {"audit", &checks_.audit},
                                                                   {"spot", &checks_.spot}};
    for (const auto& [stage, seconds] : stages)
        out << "tessera_check_seconds_total{stage=\"" << stage << "\"} " << seconds->load() << '\n';
    family(out, "tessera_checked_results_total", "counter",
           "Results checked, those given the loss checks, those replayed by an audit and those drawn for one that "
           "could not be replayed.");
    out << "tessera_checked_results_total{checks=\"all\"} " << checks_.results.load() << '\n';
    out << "tessera_checked_results_total{checks=\"loss\"} " << checks_.loss_checked.load() << '\n';
    out << "tessera_checked_results_total{checks=\"audit\"} " << checks_.audited.load() << '\n';
    out << "tessera_checked_results_total{checks=\"unauditable\"} " << checks_.unauditable.load() << '\n';
    family(out, "tessera_worker_failures_total", "counter",
           "Jobs of the server's worker threads that threw (logged as worker_failed; the thread went on), by worker.");
    auto failures = common::worker_failures();
    failures.try_emplace("work pool", 0);  // the pool that runs validations and evaluations: always listed
    for (const auto& [worker, count] : failures)
        out << "tessera_worker_failures_total{worker=\"" << worker << "\"} " << count << '\n';
}

std::string prometheus_text(const StoredMetrics& stored, const ServerMetrics& metrics) {
    std::ostringstream out;
    family(out, "tessera_model_version", "gauge", "Current model version.");
    out << "tessera_model_version " << stored.model_version << '\n';
    family(out, "tessera_work_units", "gauge", "Work-unit assignments by lifecycle state.");
    for (const auto& [state, count] : stored.counts.assignments)
        out << "tessera_work_units{state=\"" << state << "\"} " << count << '\n';
    family(out, "tessera_volunteers", "gauge", "Registered volunteers.");
    out << "tessera_volunteers " << stored.counts.clients << '\n';
    family(out, "tessera_volunteers_active", "gauge",
           "Volunteers seen in the last " + std::to_string(kVolunteerActiveWindowS / 60) + " minutes.");
    out << "tessera_volunteers_active " << stored.counts.clients_active << '\n';
    family(out, "tessera_volunteers_quarantined", "gauge", "Volunteers whose results are kept but not merged.");
    out << "tessera_volunteers_quarantined " << stored.counts.clients_quarantined << '\n';
    family(out, "tessera_state_bytes", "gauge", "The state directory's size, by part (bounded by retention).");
    out << "tessera_state_bytes{part=\"blobs\"} " << stored.state.blobs << '\n';
    out << "tessera_state_bytes{part=\"results\"} " << stored.state.results << '\n';
    out << "tessera_state_bytes{part=\"database\"} " << stored.state.database << '\n';
    if (stored.disk_size_bytes >= 0) {
        family(out, "tessera_disk_free_bytes", "gauge", "Free space on the file system holding the state directory.");
        out << "tessera_disk_free_bytes " << stored.disk_free_bytes << '\n';
        family(out, "tessera_disk_size_bytes", "gauge", "Size of the file system holding the state directory.");
        out << "tessera_disk_size_bytes " << stored.disk_size_bytes << '\n';
    }
    family(out, "tessera_audit_events_total", "counter",
           "Audits recorded, by event: passed, failed, results whose audit went to a trusted volunteer, credit "
           "withdrawals after a failed one.");
    for (const auto& [kind, count] : stored.audit_events)
        out << "tessera_audit_events_total{kind=\"" << kind << "\"} " << count << '\n';
    family(out, "tessera_rejections_total", "counter", "Results rejected, by reason.");
    auto reasons = stored.rejections_by_reason;
    for (auto known : reason::kAll) reasons.try_emplace(std::string(known), 0);
    for (const auto& [name, count] : reasons)
        out << "tessera_rejections_total{reason=\"" << name << "\"} " << count << '\n';
    family(out, "tessera_checks_suspended", "gauge",
           "Tasks where a contribution check is suspended because it refused every result for a while, by check.");
    auto suspended = stored.suspended_checks;
    for (auto known : {reason::kNormTooLarge, reason::kNormTooSmall, reason::kMisaligned, reason::kNoImprovement,
                       reason::kLossIncrease})
        suspended.try_emplace(std::string(known), 0);
    for (const auto& [name, count] : suspended)
        out << "tessera_checks_suspended{reason=\"" << name << "\"} " << count << '\n';
    family(out, "tessera_task_seconds_without_merge", "gauge",
           "Seconds since the current task's first result returned after its last merge (0 when none waits).");
    out << "tessera_task_seconds_without_merge " << stored.seconds_without_merge << '\n';
    family(out, "tessera_task_stalled", "gauge",
           "1 when the current task has merged nothing for " + std::to_string(StallGuard::kStallSeconds) +
               " s while results came back.");
    out << "tessera_task_stalled " << (stored.stalled ? 1 : 0) << '\n';
    metrics.write(out);
    return out.str();
}

}  // namespace tessera::server
