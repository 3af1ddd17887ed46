// Dashboard: the page, its overview, history and sample routes (dashboard_prompts.cpp: the
// prompt routes).
#include "dashboard.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>

#include "clock.h"
#include "dashboard_assets.h"
#include "divergence_guard.h"
#include "database.h"
#include "liveness.h"
#include "stall_guard.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

constexpr std::int64_t kThroughputWindowS = 600;  // throughput over the last 10 minutes

const EmbeddedAsset* find_asset(std::string_view name) {
    for (const auto& asset : kDashboardAssets)
        if (asset.name == name) return &asset;
    return nullptr;
}

Response not_found(const Request& request, std::string_view what) {
    return error_response(request, http::status::not_found, "not_found", "no " + std::string(what));
}

// The task's checks suspended so as not to stall it, and its liveness.
common::Status add_task_health(Store& store, const std::string& task_id, std::int64_t now, boost::json::object& task) {
    auto suspended = suspended_checks(store, task_id);
    if (!suspended) return suspended.error();
    boost::json::array suspended_reasons;
    for (const auto& check : *suspended) suspended_reasons.emplace_back(check.reason);
    task["suspended_checks"] = std::move(suspended_reasons);
    auto divergence = store.setting(divergence_setting_key(task_id));
    if (!divergence) return divergence.error();
    boost::json::value last_divergence = nullptr;
    if (*divergence) {
        boost::system::error_code ec;
        last_divergence = boost::json::parse(**divergence, ec);
        if (ec) last_divergence = nullptr;
    }
    task["divergence"] = std::move(last_divergence);  // what the divergence guard last did
    auto liveness = task_liveness(store, task_id, now);
    if (!liveness) return liveness.error();
    boost::json::object refusals;
    for (const auto& [why, count] : liveness->refusals) refusals[why] = count;
    task["liveness"] = {{"stalled", liveness->stalled},
                        {"seconds_without_merge", liveness->seconds_without_merge},
                        {"last_merge_at", number_or_null(liveness->last_merge_at)},
                        {"refusals_since_merge", std::move(refusals)}};
    return {};
}

// The newest evaluation, and the newest on the whole validation set.
common::Status add_evaluations(Store& store, const std::string& task_id, boost::json::object& body) {
    auto versions = store.versions(task_id);
    if (!versions) return versions.error();
    auto newest_evaluated = std::find_if(versions->rbegin(), versions->rend(),
                                         [](const VersionRecord& v) { return v.validation_loss.has_value(); });
    if (newest_evaluated != versions->rend()) {
        body["validation_loss"] = *newest_evaluated->validation_loss;
        body["validation_accuracy"] = number_or_null(newest_evaluated->validation_accuracy);
        body["validation_samples"] = number_or_null(newest_evaluated->validation_samples);
        body["validation_full"] = newest_evaluated->validation_full;
        body["evaluated_version"] = newest_evaluated->version;
    }
    auto newest_full =
        std::find_if(versions->rbegin(), versions->rend(), [](const VersionRecord& v) { return v.validation_full; });
    if (newest_full != versions->rend())
        body["full_validation"] = {{"version", newest_full->version},
                                   {"loss", number_or_null(newest_full->validation_loss)},
                                   {"accuracy", number_or_null(newest_full->validation_accuracy)},
                                   {"samples", number_or_null(newest_full->validation_samples)}};
    return {};
}

// Samples trained so far, and the rate over the last window.
common::Status add_throughput(Store& store, const TaskRecord& task, std::int64_t now, boost::json::object& body) {
    auto total = store.activity_since(task.id, 0);
    if (!total) return total.error();
    body["samples_trained"] = total->samples;
    // A young task's rate is over its age, not over a window it has not lived through.
    auto window = std::clamp<std::int64_t>(now - task.created_at, 1, kThroughputWindowS);
    auto recent = store.activity_since(task.id, now - window);
    if (!recent) return recent.error();
    body["throughput"] = {
        {"samples_per_s", static_cast<double>(recent->samples) / static_cast<double>(window)},
        {"work_units_per_hour", static_cast<double>(recent->accepted) * 3600.0 / static_cast<double>(window)},
        {"window_s", window}};
    return {};
}

}  // namespace

Dashboard::Dashboard(Store& store, TaskFactsLookup task_facts, RunFacts facts, Clock clock)
    : store_(store), task_facts_(std::move(task_facts)), facts_(std::move(facts)), clock_(std::move(clock)) {}

StateUsage Dashboard::state_usage() const {
    auto usage = server::state_usage(facts_.state, *facts_.files);
    if (is_postgres_url(facts_.state.database_url()))
        if (auto bytes = store_.database_bytes()) usage.database = *bytes;
    return usage;
}

std::variant<std::optional<TaskView>, Response> Dashboard::task_of(const Request& request, const std::string& task_id) {
    if (task_id.empty()) {
        auto current = load_current_task(store_);
        if (!current) return internal_error(request, current.message());
        return std::move(*current);
    }
    auto record = store_.task(task_id);
    if (!record) return internal_error(request, record.message());
    if (!*record) return not_found(request, "task '" + task_id + "'");
    auto view = task_view(std::move(**record));
    if (!view) return internal_error(request, view.message());
    return std::optional<TaskView>(std::move(*view));
}

// Every task, oldest first: its state, weight and progress, its place in an expert group, the
// volunteers given its units lately, and whether this process serves it.
Response Dashboard::tasks(const Request& request) {
    auto records = store_.tasks();
    if (!records) return internal_error(request, records.message());
    auto now = clock_();
    boost::json::array rows;
    for (const auto& record : *records) {
        auto view = task_view(record);
        if (!view) return internal_error(request, view.message());
        auto versions = store_.versions(record.id);
        if (!versions) return internal_error(request, versions.message());
        auto volunteers = store_.task_volunteers(record.id, now - kThroughputWindowS);
        if (!volunteers) return internal_error(request, volunteers.message());
        auto evaluated = std::find_if(versions->rbegin(), versions->rend(),
                                      [](const VersionRecord& v) { return v.validation_loss.has_value(); });
        bool has_evaluation = evaluated != versions->rend();
        const auto& config = view->config;
        bool grouped = !config.expert_group.empty();
        rows.push_back(
            {{"id", record.id},
             {"state", task_state_name(record.state)},
             {"weight", record.weight},
             {"model", config.model},
             {"policy", policy_name(config.merge.kind)},
             {"created_at", record.created_at},
             {"version", record.version},
             {"validation_loss", has_evaluation ? boost::json::value(*evaluated->validation_loss) : nullptr},
             {"validation_accuracy", has_evaluation ? number_or_null(evaluated->validation_accuracy) : nullptr},
             {"volunteers", *volunteers},
             {"expert_group", grouped ? boost::json::value(config.expert_group) : nullptr},
             {"expert_index", grouped ? boost::json::value(config.expert_index) : nullptr},
             {"served", task_facts_(record.id) != nullptr}});
    }
    auto current = store_.current_task();
    if (!current) return internal_error(request, current.message());
    return json_response(request, http::status::ok,
                         {{"tasks", rows}, {"current", *current ? boost::json::value((*current)->id) : nullptr}});
}

// Embedded files: revalidated each time (ETag), so a new server build is picked up at once.
Response Dashboard::page(const Request& request, std::string_view name) {
    const auto* asset = find_asset(name);
    if (asset == nullptr) return not_found(request, "asset " + std::string(name));
    bool unchanged = request[http::field::if_none_match] == asset->etag;
    http::response<http::string_body> response{unchanged ? http::status::not_modified : http::status::ok,
                                               request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, asset->content_type);
    response.set(http::field::etag, asset->etag);
    response.set(http::field::cache_control, "no-cache");
    response.set("X-Content-Type-Options", "nosniff");
    if (name == "index.html")
        response.set("Content-Security-Policy",
                     "default-src 'self'; img-src 'self' blob: data:; style-src 'self' 'unsafe-inline'");
    response.keep_alive(request.keep_alive());
    if (!unchanged && request.method() == http::verb::get) response.body() = std::string(asset->body);
    response.prepare_payload();
    if (request.method() == http::verb::head) response.content_length(asset->body.size());
    return response;
}

Response Dashboard::stats(const Request& request, const std::string& task_id) {
    auto now = clock_();
    auto counts = store_.counts(now - kVolunteerActiveWindowS);
    if (!counts) return internal_error(request, counts.message());
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    auto last_event = store_.last_event_id();
    if (!last_event) return internal_error(request, last_event.message());
    boost::json::object work_units;
    for (const auto& [state, count] : counts->assignments) work_units[state] = count;
    boost::json::object units;
    for (const auto& [state, count] : counts->work_units) units[state] = count;
    boost::json::object body{{"work_units", work_units},
                             {"work_unit_groups", units},
                             {"volunteers_active", counts->clients_active},
                             {"volunteers", counts->clients},
                             {"rejections", counts->rejections},
                             {"server_time", now},
                             {"started_at", facts_.started_at},
                             {"uptime_s", now - facts_.started_at},
                             {"last_event_id", *last_event},
                             {"version", 0},
                             {"validation_loss", nullptr},
                             {"validation_accuracy", nullptr},
                             {"validation_samples", nullptr},
                             {"validation_full", false},
                             {"validation_set_samples", 0},
                             {"full_validation", nullptr},
                             {"samples_trained", 0},
                             {"throughput", {{"samples_per_s", 0.0}, {"work_units_per_hour", 0.0}, {"window_s", 0}}},
                             {"task", nullptr}};
    auto usage = state_usage();
    body["state_bytes"] = {
        {"blobs", usage.blobs}, {"results", usage.results}, {"database", usage.database}, {"total", usage.total()}};
    if (!task) return json_response(request, http::status::ok, body);

    const auto& t = *task;
    auto facts = task_facts_(t.record.id);
    body["version"] = t.record.version;
    body["validation_set_samples"] = facts ? facts->validation_set_samples : 0;
    body["task"] = {{"id", t.record.id},
                    {"model", t.config.model},
                    {"parameters", facts ? facts->parameters : 0},
                    {"policy", policy_name(t.config.merge.kind)},
                    {"state", task_state_name(t.record.state)},
                    {"weight", t.record.weight},
                    {"created_at", t.record.created_at},
                    {"eval_samples", t.config.eval_samples},
                    {"eval_full_interval_s", t.config.eval_full_interval_s}};
    if (auto health = add_task_health(store_, t.record.id, now, body["task"].as_object()); !health)
        return internal_error(request, health.message());
    if (auto evaluations = add_evaluations(store_, t.record.id, body); !evaluations)
        return internal_error(request, evaluations.message());
    if (auto throughput = add_throughput(store_, t.record, now, body); !throughput)
        return internal_error(request, throughput.message());
    return json_response(request, http::status::ok, body);
}

// Results per time bucket (?bucket=S seconds, ?buckets=N of them up to now), gaps filled with
// zeros, and merged results by staleness.
Response Dashboard::history(const Request& request, const std::string& task_id) {
    auto bucket_s = query_integer(request.target(), "bucket", 60, 10, 86400);
    auto count = query_integer(request.target(), "buckets", 120, 1, kMaxQueryLimit);
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    boost::json::array buckets;
    boost::json::array staleness;
    if (task) {
        const auto& id = task->record.id;
        auto now = clock_();
        auto current = now / bucket_s * bucket_s;
        auto since = current - (count - 1) * bucket_s;
        auto rows = store_.history(id, since, bucket_s);
        if (!rows) return internal_error(request, rows.message());
        auto row = rows->begin();
        for (auto start = rows->empty() ? current + bucket_s : rows->front().start; start <= current;
             start += bucket_s) {
            HistoryBucket bucket{start, 0, 0, 0, std::nullopt};
            if (row != rows->end() && row->start == start) bucket = *row++;
            // The rate over the part of the bucket the task has lived through.
            auto covered = std::min(start + bucket_s, now) - std::max(start, task->record.created_at);
            auto rate = static_cast<double>(bucket.samples) / static_cast<double>(std::max<std::int64_t>(covered, 1));
            buckets.push_back({{"start", bucket.start},
                               {"accepted", bucket.accepted},
                               {"rejected", bucket.rejected},
                               {"samples", bucket.samples},
                               {"samples_per_s", rate},
                               {"train_loss", number_or_null(bucket.train_loss)}});
        }
        auto stale = store_.staleness_counts(id);
        if (!stale) return internal_error(request, stale.message());
        for (const auto& [versions, n] : *stale) staleness.push_back({{"staleness", versions}, {"count", n}});
    }
    return json_response(request, http::status::ok,
                         {{"bucket_s", bucket_s}, {"buckets", buckets}, {"staleness", staleness}});
}

// What the samples panel shows: a grid image per version ("images"), the classifier's
// accuracy ("accuracy"), or nothing the model can draw ("none").
Response Dashboard::samples(const Request& request, const std::string& task_id) {
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    if (!task) return json_response(request, http::status::ok, {{"kind", "none"}, {"message", "no task"}});
    auto facts = task_facts_(task->record.id);
    if (!facts) return json_response(request, http::status::ok, {{"kind", "none"}, {"message", "task not served"}});
    if (facts->samples_kind != "images" || facts->gallery == nullptr) {
        boost::json::object body{{"kind", facts->samples_kind}};
        if (facts->samples_kind == "none") body["message"] = "this model or its dataset cannot draw images";
        return json_response(request, http::status::ok, body);
    }
    auto current = task->record.version;
    auto status = facts->gallery->request(current);
    boost::json::array classes;
    for (const auto& name : facts->classes) classes.push_back(boost::json::value(name));
    boost::json::object body{{"kind", "images"},   {"current_version", current}, {"rendering", status.rendering},
                             {"classes", classes}, {"version", nullptr},         {"url", nullptr}};
    if (status.version) {
        body["version"] = *status.version;
        auto base = task_id.empty() ? std::string("/api/v1/samples/") : "/api/v1/tasks/" + task_id + "/samples/";
        body["url"] = base + std::to_string(*status.version) + ".png";
    }
    if (!status.error.empty()) body["error"] = status.error;
    if (!facts->routing.empty()) body["routing"] = facts->routing;
    return json_response(request, http::status::ok, body);
}

// /api/v1/samples/<version>.png: immutable once drawn.
Response Dashboard::sample_image(const Request& request, const std::string& task_id, std::string_view name) {
    constexpr std::string_view kPng = ".png";
    auto version = name.ends_with(kPng) ? query_integer("?v=" + std::string(name.substr(0, name.size() - kPng.size())),
                                                        "v", -1, 0, common::kMaxSafeInteger)
                                        : -1;
    auto found = task_of(request, task_id);
    if (auto* response = std::get_if<Response>(&found)) return std::move(*response);
    auto& task = std::get<std::optional<TaskView>>(found);
    auto facts = task ? task_facts_(task->record.id) : nullptr;
    auto png = facts && facts->gallery && version >= 0 ? facts->gallery->image(version) : nullptr;
    if (!png) return not_found(request, "sample image " + std::string(name) + " (GET /api/v1/samples for the newest)");
    http::response<http::vector_body<std::uint8_t>> response{http::status::ok, request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, "image/png");
    response.set(http::field::cache_control, kImmutableCacheControl);
    response.keep_alive(request.keep_alive());
    if (request.method() == http::verb::get) response.body().assign(png->begin(), png->end());
    response.prepare_payload();
    if (request.method() == http::verb::head) response.content_length(png->size());
    return response;
}

}  // namespace tessera::server
