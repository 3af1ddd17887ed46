// Store: the figures that keep a contribution check from stalling a task (stall_guard.h), and
// settings listed by prefix (where the guard records its suspensions).
#include "store_internal.h"

namespace tessera::server {
namespace {

// Assignment states of results accepted for merging (confirmed twins and quarantined
// volunteers' results are not merged).
constexpr const char* kMergingStates = "('accepted', 'merged')";

// ‖Δ‖ per full-rate step of the task's `limit` latest accepted results (parameters: task, the
// lowest and highest replicated flag taken, limit).
// Walks the acceptance index from the newest (on SQLite, CROSS JOIN and the unary + keep its
// planner from scanning every accepted row of the task and sorting them).
std::string recent_norms_sql(Dialect dialect) {
    bool sqlite = dialect == Dialect::Sqlite;
    return std::string(
               "SELECT a.delta_norm / COALESCE(a.full_rate_steps, w.local_steps) AS figure FROM assignments a ") +
           (sqlite ? "CROSS JOIN" : "JOIN") +
           " work_units w ON w.id = a.work_unit_id WHERE a.accepted_seq IS NOT NULL AND w.task_id = ? AND " +
           (sqlite ? "+a.state" : "a.state") +
           " IN ('accepted', 'confirmed', 'merged') AND a.delta_norm IS NOT NULL AND "
           "(CASE WHEN w.replicas > 1 THEN 1 ELSE 0 END) BETWEEN ? AND ? ORDER BY a.accepted_seq DESC LIMIT ?";
}

// The bounds of recent_norms_sql's replicated flag (0 single, 1 replicated) for `pool`.
std::pair<std::int64_t, std::int64_t> replicated_flags(NormPool pool) {
    if (pool == NormPool::Replicated) return {1, 1};
    if (pool == NormPool::Single) return {0, 0};
    return {0, 1};
}

// The alignments of the task's `limit` latest results that passed the checks (parameters: task,
// limit). Walks the results by return from the newest, as the norms walk acceptance.
std::string recent_alignments_sql(Dialect dialect) {
    bool sqlite = dialect == Dialect::Sqlite;
    return std::string("SELECT a.alignment AS figure FROM assignments a ") + (sqlite ? "CROSS JOIN" : "JOIN") +
           " work_units w ON w.id = a.work_unit_id WHERE a.returned_at IS NOT NULL AND w.task_id = ? AND "
           "a.alignment IS NOT NULL AND " +
           (sqlite ? "+a.state" : "a.state") +
           " IN ('validated', 'accepted', 'confirmed', 'merged') ORDER BY a.returned_at DESC, a.rowid DESC LIMIT ?";
}

std::vector<double> figures_of(Statement& query) {
    std::vector<double> figures;
    while (query.step()) figures.push_back(query.real(0));
    return figures;
}

}  // namespace

common::Result<StallFigures> ResultStore::stall_figures(const std::string& task_id, const std::string& reason) {
    return reading([&]() -> common::Result<StallFigures> {
        StallFigures figures;
        Statement last(db(), std::string("SELECT MAX(a.returned_at) FROM assignments a JOIN work_units w ON "
                                         "w.id = a.work_unit_id WHERE w.task_id = ? AND a.state IN ") +
                                 kMergingStates);
        last.bind(1, task_id).step();
        figures.last_merge_at = last.optional_integer(0);
        Statement refused(db(),
                          "SELECT COUNT(*), COUNT(DISTINCT r.client_id), MIN(r.at) FROM rejections r "
                          "JOIN assignments a ON a.id = r.assignment_id JOIN work_units w ON w.id = a.work_unit_id "
                          "WHERE w.task_id = ? AND r.reason = ? AND r.at >= ?");
        refused.bind(1, task_id).bind(2, reason).bind(3, figures.last_merge_at.value_or(0)).step();
        figures.refusals = refused.integer(0);
        figures.volunteers = refused.integer(1);
        figures.first_refusal_at = refused.optional_integer(2);
        Statement returned(db(),
                           "SELECT MIN(a.returned_at) FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                           "WHERE w.task_id = ? AND a.returned_at > ?");
        returned.bind(1, task_id).bind(2, figures.last_merge_at.value_or(-1)).step();
        figures.first_return_at = returned.optional_integer(0);
        return figures;
    });
}

common::Result<std::vector<double>> ResultStore::recent_alignments(const std::string& task_id, int limit) {
    return reading([&]() -> common::Result<std::vector<double>> {
        Statement query(db(), recent_alignments_sql(db().dialect()));
        query.bind(1, task_id).bind(2, limit);
        return figures_of(query);
    });
}

common::Result<std::vector<double>> ResultStore::recent_norms_per_step(const std::string& task_id, int limit,
                                                                       NormPool pool) {
    return reading([&]() -> common::Result<std::vector<double>> {
        Statement query(db(), recent_norms_sql(db().dialect()));
        auto [lowest, highest] = replicated_flags(pool);
        query.bind(1, task_id).bind(2, lowest).bind(3, highest).bind(4, limit);
        return figures_of(query);
    });
}

common::Result<RecentFigures> ResultStore::recent_figures(const std::string& task_id, int limit, NormPool pool) {
    return reading([&]() -> common::Result<RecentFigures> {
        Statement query(db(), "SELECT 0, figure FROM (" + recent_norms_sql(db().dialect()) +
                                  ") AS norms UNION ALL SELECT 1, figure FROM (" +
                                  recent_alignments_sql(db().dialect()) + ") AS alignments");
        auto [lowest, highest] = replicated_flags(pool);
        query.bind(1, task_id).bind(2, lowest).bind(3, highest).bind(4, limit).bind(5, task_id).bind(6, limit);
        RecentFigures figures;
        while (query.step())
            (query.integer(0) == 0 ? figures.norms_per_step : figures.alignments).push_back(query.real(1));
        return figures;
    });
}

common::Result<std::int64_t> ResultStore::merges_since(const std::string& task_id, std::int64_t since) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(), std::string("SELECT COUNT(*) FROM assignments a JOIN work_units w ON "
                                          "w.id = a.work_unit_id WHERE w.task_id = ? AND a.returned_at >= ? "
                                          "AND a.state IN ") +
                                  kMergingStates);
        query.bind(1, task_id).bind(2, since).step();
        return query.integer(0);
    });
}

common::Result<std::vector<std::pair<std::string, std::string>>> SettingStore::settings_with_prefix(
    const std::string& prefix) {
    return reading([&]() -> common::Result<std::vector<std::pair<std::string, std::string>>> {
        // substr, not LIKE: a task id may hold LIKE's wildcards (the cast: PostgreSQL's substr
        // takes an integer length, and a bound integer is a bigint there).
        Statement query(db(), "SELECT key, value FROM settings WHERE substr(key, 1, CAST(? AS INTEGER)) = ? ORDER BY key");
        query.bind(1, static_cast<std::int64_t>(prefix.size())).bind(2, prefix);
        std::vector<std::pair<std::string, std::string>> rows;
        while (query.step()) rows.emplace_back(query.text(0), query.text(1));
        return rows;
    });
}

common::Status SettingStore::remove_setting(const std::string& key) {
    return guarded([&]() -> common::Status {
        Statement(db(), "DELETE FROM settings WHERE key = ?").bind(1, key).run();
        return {};
    });
}

common::Result<std::optional<ResultContext>> ResultStore::result_context(const std::string& id,
                                                                         std::int64_t active_since,
                                                                         const std::string& settings_prefix) {
    return reading([&]() -> common::Result<std::optional<ResultContext>> {
        Statement query(
            db(), std::string("SELECT ") + kAssignmentColumns + ", " + kTaskColumns + ", " + kWorkUnitColumns + ", " +
                      kClientColumns +
                      ", (SELECT COUNT(*) FROM task_volunteers i WHERE i.task_id = w.task_id AND "
                      "i.last_issued_at >= ?), (SELECT COUNT(*) FROM "
                      "settings s WHERE substr(s.key, 1, length(?) + length(w.task_id) + 1) = ? || w.task_id || "
                      "'/'), CASE WHEN EXISTS (SELECT 1 FROM assignments b JOIN work_units bw ON bw.id = "
                      "b.work_unit_id WHERE b.client_id = a.client_id AND bw.task_id = w.task_id AND b.id != a.id "
                      "AND b.returned_at <= COALESCE(a.returned_at, 9223372036854775807)) THEN 1 ELSE 0 END FROM "
                      "assignments a JOIN work_units w ON w.id = a.work_unit_id JOIN tasks t ON t.id = w.task_id "
                      "LEFT JOIN clients c ON c.id = a.client_id WHERE a.id = ?");
        query.bind(1, active_since).bind(2, settings_prefix).bind(3, settings_prefix).bind(4, id);
        if (!query.step()) return std::optional<ResultContext>();
        constexpr int kTask = kAssignmentColumnCount;
        constexpr int kUnit = kTask + kTaskColumnCount;
        constexpr int kClient = kUnit + kWorkUnitColumnCount;
        constexpr int kAfter = kClient + kClientColumnCount;
        ResultContext context;
        context.assignment = read_assignment(query);
        context.task = read_task(query, kTask);
        context.unit = read_work_unit(query, kUnit);
        if (!query.is_null(kClient)) context.client = read_client(query, kClient);
        context.task_volunteers = query.integer(kAfter);
        context.settings_of_task = query.integer(kAfter + 1);
        context.returned_before = query.integer(kAfter + 2) != 0;
        return std::optional<ResultContext>(std::move(context));
    });
}

}  // namespace tessera::server
