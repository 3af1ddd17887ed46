// Store: the figures that keep a contribution check from stalling a task (stall_guard.h), and
// settings listed by prefix (where the guard records its suspensions).
#include "store_internal.h"

namespace tessera::server {
namespace {

// Assignment states of results accepted for merging (confirmed twins and quarantined
// volunteers' results are not merged).
constexpr const char* kMergingStates = "('accepted', 'merged')";

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
        Statement query(db(),
                        "SELECT a.alignment FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE w.task_id = ? AND a.alignment IS NOT NULL "
                        "AND a.state IN ('validated', 'accepted', 'confirmed', 'merged') "
                        "ORDER BY a.returned_at DESC, a.rowid DESC LIMIT ?");
        query.bind(1, task_id).bind(2, limit);
        std::vector<double> alignments;
        while (query.step()) alignments.push_back(query.real(0));
        return alignments;
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

}  // namespace tessera::server
