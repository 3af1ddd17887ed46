// The store's read-only queries for the dashboard and /metrics: results over time, recent
// activity, staleness, rejection reasons and the events of given kinds.
#include <algorithm>

#include "store_internal.h"

namespace tessera::server {
namespace {

// Results of a task: assignments joined with their work units.
constexpr const char* kTaskResults =
    "FROM assignments a JOIN work_units w ON w.id = a.work_unit_id WHERE w.task_id = ? ";
// Samples of a result accepted for merging (twins that only confirm one do not count).
std::string merged_samples(Dialect dialect) {
    return "COALESCE(SUM(CASE WHEN a.state IN ('accepted', 'merged') THEN " +
           json_number(dialect, "a.metrics", "samples") + " END), 0)";
}
// Counts the rows where `condition` holds.
std::string count_where(const std::string& condition) {
    return "COALESCE(SUM(CASE WHEN " + condition + " THEN 1 ELSE 0 END), 0)";
}

}  // namespace

common::Result<std::int64_t> HistoryStore::last_event_id() {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(), "SELECT COALESCE(MAX(id), 0) FROM events");
        query.step();
        return query.integer(0);
    });
}

common::Result<std::vector<EventRecord>> HistoryStore::latest_events(const std::vector<std::string>& kinds, int limit) {
    return reading([&]() -> common::Result<std::vector<EventRecord>> {
        std::vector<EventRecord> events;
        for (const auto& kind : kinds) {
            Statement query(db(), "SELECT id, at, kind, detail FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?");
            query.bind(1, kind).bind(2, limit);
            while (query.step()) events.push_back({query.integer(0), query.integer(1), query.text(2), query.text(3)});
        }
        std::sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.id > b.id; });
        if (events.size() > static_cast<std::size_t>(std::max(limit, 0))) events.resize(std::max(limit, 0));
        return events;
    });
}

common::Result<std::map<std::string, std::int64_t>> HistoryStore::event_counts(const std::vector<std::string>& kinds) {
    return reading([&]() -> common::Result<std::map<std::string, std::int64_t>> {
        std::map<std::string, std::int64_t> counts;
        for (const auto& kind : kinds) {
            Statement query(db(), "SELECT COUNT(*) FROM events WHERE kind = ?");
            query.bind(1, kind).step();
            counts[kind] = query.integer(0);
        }
        return counts;
    });
}

common::Result<std::vector<HistoryBucket>> HistoryStore::history(const std::string& task_id, std::int64_t since,
                                                                 std::int64_t bucket_s) {
    return reading([&]() -> common::Result<std::vector<HistoryBucket>> {
        std::map<std::int64_t, HistoryBucket> buckets;
        auto dialect = db().dialect();
        Statement results(db(), "SELECT (a.returned_at / ?) * ?, " +
                                    count_where("a.state IN ('accepted', 'merged', 'confirmed')") + ", " +
                                    merged_samples(dialect) +
                                    ", AVG(CASE WHEN a.state IN ('accepted', 'merged', 'confirmed') THEN " +
                                    json_number(dialect, "a.metrics", "loss_end") + " END) " + kTaskResults +
                                    "AND a.returned_at >= ? GROUP BY 1");
        results.bind(1, bucket_s).bind(2, bucket_s).bind(3, task_id).bind(4, since);
        while (results.step()) {
            auto& bucket = buckets[results.integer(0)];
            bucket.accepted = results.integer(1);
            bucket.samples = results.integer(2);
            bucket.train_loss = results.optional_real(3);
        }
        Statement rejected(db(),
                           "SELECT (r.at / ?) * ?, COUNT(*) FROM rejections r "
                           "JOIN assignments a ON a.id = r.assignment_id "
                           "JOIN work_units w ON w.id = a.work_unit_id "
                           "WHERE w.task_id = ? AND r.at >= ? GROUP BY 1");
        rejected.bind(1, bucket_s).bind(2, bucket_s).bind(3, task_id).bind(4, since);
        while (rejected.step()) buckets[rejected.integer(0)].rejected = rejected.integer(1);
        std::vector<HistoryBucket> rows;
        for (auto& [start, bucket] : buckets) {
            bucket.start = start;
            rows.push_back(bucket);
        }
        return rows;
    });
}

common::Result<ActivityTotals> HistoryStore::activity_since(const std::string& task_id, std::int64_t since) {
    return reading([&]() -> common::Result<ActivityTotals> {
        Statement query(db(), "SELECT " + count_where("a.state IN ('accepted', 'merged')") + ", " +
                                  merged_samples(db().dialect()) + " " + kTaskResults + "AND a.returned_at >= ?");
        query.bind(1, task_id).bind(2, since);
        query.step();
        return ActivityTotals{query.integer(0), query.integer(1)};
    });
}

common::Result<RunProgress> HistoryStore::run_progress(const std::string& task_id, std::int64_t issued_since) {
    auto volunteers = task_volunteers(task_id, issued_since);
    if (!volunteers) return volunteers.error();
    return reading([&]() -> common::Result<RunProgress> {
        Statement steps(db(), std::string("SELECT COALESCE(SUM(w.local_steps), 0) ") + kTaskResults +
                                  "AND a.state IN ('accepted', 'merged')");
        steps.bind(1, task_id);
        steps.step();
        Statement fastest(db(),
                          "SELECT COALESCE(MAX(c.samples_per_s), 0) FROM task_volunteers v JOIN clients c ON c.id = "
                          "v.client_id WHERE v.task_id = ? AND v.last_issued_at >= ?");
        fastest.bind(1, task_id).bind(2, issued_since);
        fastest.step();
        return RunProgress{steps.integer(0), *volunteers, fastest.real(0)};
    });
}

common::Result<std::int64_t> HistoryStore::task_volunteers(const std::string& task_id, std::int64_t issued_since) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement volunteers(db(), "SELECT COUNT(*) FROM task_volunteers WHERE task_id = ? AND last_issued_at >= ?");
        volunteers.bind(1, task_id).bind(2, issued_since);
        volunteers.step();
        return volunteers.integer(0);
    });
}

common::Result<std::map<std::int64_t, std::int64_t>> HistoryStore::staleness_counts(const std::string& task_id) {
    return reading([&]() -> common::Result<std::map<std::int64_t, std::int64_t>> {
        // A result merged into version v was added to the model at version v - 1: the
        // aggregator commits whatever its policy merged before it takes the next result.
        Statement query(db(), std::string("SELECT a.merged_version - 1 - w.base_version, COUNT(*) ") + kTaskResults +
                                  "AND a.state = 'merged' GROUP BY 1");
        query.bind(1, task_id);
        std::map<std::int64_t, std::int64_t> counts;
        while (query.step()) counts[query.integer(0)] = query.integer(1);
        return counts;
    });
}

common::Result<std::map<std::string, std::int64_t>> HistoryStore::rejection_counts() {
    return reading([&]() -> common::Result<std::map<std::string, std::int64_t>> {
        Statement query(db(), "SELECT reason, COUNT(*) FROM rejections GROUP BY reason");
        std::map<std::string, std::int64_t> counts;
        while (query.step()) counts[query.text(0)] = query.integer(1);
        return counts;
    });
}

}  // namespace tessera::server
