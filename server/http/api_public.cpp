// Api: the public read-only routes (versions, volunteers, rejections, events, audits, /metrics) and
// the operator's admin routes. The dashboard's own routes are in dashboard.cpp.
#include <sys/statvfs.h>

#include <boost/json.hpp>

#include "api.h"
#include "liveness.h"
#include "stall_guard.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

boost::json::object version_json(const VersionRecord& v) {
    return {{"version", v.version},
            {"created_at", v.created_at},
            {"merged_results", v.merged_results},
            {"validation_loss", number_or_null(v.validation_loss)},
            {"validation_accuracy", number_or_null(v.validation_accuracy)},
            {"validation_samples", number_or_null(v.validation_samples)},
            {"validation_full", v.validation_full}};
}

// An event as GET /api/v1/events and /api/v1/audits list it.
boost::json::object event_json(const EventRecord& e) {
    return {{"id", e.id}, {"at", e.at}, {"kind", e.kind}, {"detail", boost::json::parse(e.detail_json)}};
}

}  // namespace

Response Api::versions(const Request& request, const std::string& task_id) {
    auto task = task_id.empty() ? store_.current_task() : store_.task(task_id);
    if (!task) return internal_error(request, task.message());
    if (!*task && !task_id.empty())
        return error_response(request, http::status::not_found, "not_found", "no task '" + task_id + "'");
    boost::json::array rows;
    if (*task) {
        auto versions = store_.versions((*task)->id);
        if (!versions) return internal_error(request, versions.message());
        for (const auto& v : *versions) rows.push_back(version_json(v));
    }
    return json_response(request, http::status::ok, {{"versions", rows}});
}

Response Api::volunteers(const Request& request, bool full) {
    auto clients = store_.clients();
    if (!clients) return internal_error(request, clients.message());
    boost::json::array rows;
    for (const auto& c : *clients) {
        boost::json::object row{{"id", c.id},
                                {"name", c.name},
                                {"credit", c.credit},
                                {"accepted", c.accepted},
                                {"rejected", c.rejected},
                                {"device", c.device},
                                {"samples_per_s", c.samples_per_s},
                                {"valid_streak", c.valid_streak},
                                {"quarantined", c.quarantined},
                                {"last_seen", c.last_seen}};
        if (full) {
            row["banned"] = c.banned;
            row["client_version"] = c.client_version;
            row["registered_at"] = c.registered_at;
        }
        rows.push_back(std::move(row));
    }
    return json_response(request, http::status::ok, {{"volunteers", rows}});
}

Response Api::rejections(const Request& request) {
    auto limit = query_integer(request.target(), "limit", 50, 1, kMaxQueryLimit);
    auto rows = store_.rejections(static_cast<int>(limit));
    if (!rows) return internal_error(request, rows.message());
    boost::json::array list;
    for (const auto& r : *rows)
        list.push_back({{"id", r.id},
                        {"wu_id", r.assignment_id},
                        {"client_id", r.client_id},
                        {"reason", r.reason},
                        {"detail", r.detail},
                        {"at", r.at}});
    return json_response(request, http::status::ok, {{"rejections", list}});
}

Response Api::events(const Request& request) {
    auto after = query_integer(request.target(), "after", 0, 0, common::kMaxSafeInteger);
    auto limit = query_integer(request.target(), "limit", 100, 1, kMaxQueryLimit);
    auto rows = store_.events_after(after, static_cast<int>(limit));
    if (!rows) return internal_error(request, rows.message());
    boost::json::array list;
    for (const auto& e : *rows) list.push_back(event_json(e));
    return json_response(request, http::status::ok, {{"events", list}});
}

// The audits' record: how many of each audit event, and the newest ones (the dashboard's
// "Audits" card).
Response Api::audits(const Request& request) {
    auto limit = query_integer(request.target(), "limit", 20, 1, kMaxQueryLimit);
    auto counts = store_.event_counts(kAuditEventKinds);
    if (!counts) return internal_error(request, counts.message());
    auto rows = store_.latest_events(kAuditEventKinds, static_cast<int>(limit));
    if (!rows) return internal_error(request, rows.message());
    boost::json::object totals;
    for (const auto& [kind, count] : *counts) totals[kind] = count;
    boost::json::array list;
    for (const auto& e : *rows) list.push_back(event_json(e));
    return json_response(request, http::status::ok, {{"counts", totals}, {"events", list}});
}

std::int64_t Api::event_stream_start(const http::request_header<>& header) {
    auto after = query_integer(header.target(), "after", 0, 0, common::kMaxSafeInteger);
    auto last = header["Last-Event-ID"];
    if (!last.empty()) after = query_integer("?id=" + std::string(last), "id", after, 0, common::kMaxSafeInteger);
    return after;
}

// Prometheus text exposition format, version 0.0.4 (server_metrics.cpp).
Response Api::metrics(const Request& request) {
    StoredMetrics stored;
    auto counts = store_.counts(clock_() - kVolunteerActiveWindowS);
    if (!counts) return internal_error(request, counts.message());
    stored.counts = std::move(*counts);
    auto task = load_current_task(store_);
    if (!task) return internal_error(request, task.message());
    if (*task) {
        stored.model_version = (*task)->record.version;
        auto liveness = task_liveness(store_, (*task)->record.id, clock_());
        if (!liveness) return internal_error(request, liveness.message());
        stored.seconds_without_merge = liveness->seconds_without_merge;
        stored.stalled = liveness->stalled;
    }
    auto reasons = store_.rejection_counts();
    if (!reasons) return internal_error(request, reasons.message());
    stored.rejections_by_reason = std::move(*reasons);
    auto audits = store_.event_counts(kAuditEventKinds);
    if (!audits) return internal_error(request, audits.message());
    stored.audit_events = std::move(*audits);
    auto suspended = suspended_checks(store_);
    if (!suspended) return internal_error(request, suspended.message());
    for (const auto& check : *suspended) ++stored.suspended_checks[check.reason];
    stored.state = dashboard_.state_usage();
    if (struct statvfs disk {}; statvfs(blobs_.dir().c_str(), &disk) == 0) {
        stored.disk_free_bytes = static_cast<std::int64_t>(disk.f_bavail) * static_cast<std::int64_t>(disk.f_frsize);
        stored.disk_size_bytes = static_cast<std::int64_t>(disk.f_blocks) * static_cast<std::int64_t>(disk.f_frsize);
    }
    return text_response(request, http::status::ok, prometheus_text(stored, metrics_), "text/plain; version=0.0.4");
}

// Admin routes: GET volunteers (full rows); POST tasks/<id>/pause, resume, finish, weight;
// task/pause and task/resume (the current task); clients/<id>/ban, clients/<id>/unban,
// clients/<id>/release (from quarantine).
Response Api::task_action(const Request& request, std::string_view task_id, std::string_view action) {
    std::string id(task_id);
    auto task = id.empty() ? store_.current_task() : store_.task(id);
    if (!task) return internal_error(request, task.message());
    if (!*task) return error_response(request, http::status::not_found, "not_found", "no task '" + id + "'");
    id = (*task)->id;
    if (action == "weight") {
        double weight = query_number(request.target(), "value", -1);
        if (!(weight >= 0) || weight > 1e6)
            return error_response(request, http::status::bad_request, "bad_request",
                                  "weight needs ?value=W, 0 <= W <= 1e6");
        if (auto status = store_.set_task_weight(id, weight); !status) return internal_error(request, status.message());
        return json_response(request, http::status::ok, {{"task", id}, {"weight", weight}});
    }
    auto state = state_for_action(action);
    if (!state) return internal_error(request, "no task state for the action " + std::string(action));
    if ((*task)->state == TaskState::Finished && *state != TaskState::Finished)
        return error_response(request, http::status::conflict, "finished", "task '" + id + "' is finished");
    if (auto status = store_.set_task_state(id, *state, clock_()); !status)
        return internal_error(request, status.message());
    return json_response(request, http::status::ok, {{"task", id}, {"state", task_state_name(*state)}});
}

Response Api::client_action(const Request& request, std::string_view client_id, std::string_view action) {
    std::string id(client_id);
    auto known = store_.client(id);
    if (!known) return internal_error(request, known.message());
    if (!*known) return error_response(request, http::status::not_found, "not_found", "no client '" + id + "'");
    if (action == "release") {
        auto released = store_.set_client_quarantined(id, false, "released by the operator", clock_());
        if (!released) return internal_error(request, released.message());
        return json_response(request, http::status::ok, {{"client_id", id}, {"quarantined", false}});
    }
    auto status = store_.set_client_banned(id, action == "ban", clock_());
    if (!status) return internal_error(request, status.message());
    return json_response(request, http::status::ok, {{"client_id", id}, {"banned", action == "ban"}});
}

}  // namespace tessera::server
