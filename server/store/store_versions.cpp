// Store: a task's model versions — committed by the aggregator, published, checkpointed,
// evaluated, retired.
#include "store_internal.h"

#include <algorithm>
#include <limits>

namespace tessera::server {

VersionRecord read_version(const Statement& row, int first) {
    VersionRecord v;
    v.task_id = row.text(first);
    v.version = row.integer(first + 1);
    v.blob_sha256 = row.text(first + 2);
    v.blob_bytes = row.integer(first + 3);
    if (!row.is_null(first + 4)) v.optimizer_sha256 = row.text(first + 4);
    v.created_at = row.integer(first + 5);
    v.merged_results = row.integer(first + 6);
    v.validation_loss = row.optional_real(first + 7);
    v.validation_accuracy = row.optional_real(first + 8);
    if (!row.is_null(first + 9)) v.validation_samples = row.integer(first + 9);
    v.validation_full = row.integer(first + 10) != 0;
    if (!row.is_null(first + 11)) v.state_sha256 = row.text(first + 11);
    if (!row.is_null(first + 12)) v.patch_sha256 = row.text(first + 12);
    v.patch_bytes = row.integer(first + 13);
    v.checkpoint = row.integer(first + 14) != 0;
    v.pinned = row.integer(first + 15) != 0;
    return v;
}

void insert_version(Database& db, const VersionRecord& v) {
    Statement(db,
              "INSERT INTO model_versions(task_id, version, blob_sha256, blob_bytes, optimizer_sha256, "
              "created_at, merged_results, state_sha256, patch_sha256, patch_bytes, checkpoint, pinned) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        .bind(1, v.task_id)
        .bind(2, v.version)
        .bind(3, v.blob_sha256)
        .bind(4, v.blob_bytes)
        .bind(5, v.optimizer_sha256)
        .bind(6, v.created_at)
        .bind(7, v.merged_results)
        .bind(8, v.state_sha256)
        .bind(9, v.patch_sha256)
        .bind(10, v.patch_bytes)
        .bind(11, std::int64_t{v.checkpoint ? 1 : 0})
        .bind(12, std::int64_t{v.pinned ? 1 : 0})
        .run();
}

common::Result<std::optional<VersionRecord>> VersionStore::version(const std::string& task_id, std::int64_t version) {
    return reading([&]() -> common::Result<std::optional<VersionRecord>> {
        Statement query(db(), std::string("SELECT ") + kVersionColumns +
                                  " FROM model_versions v WHERE task_id = ? AND version = ?");
        query.bind(1, task_id).bind(2, version);
        if (!query.step()) return std::optional<VersionRecord>();
        return std::optional<VersionRecord>(read_version(query));
    });
}

common::Result<std::vector<VersionRecord>> VersionStore::versions(const std::string& task_id) {
    return reading([&]() -> common::Result<std::vector<VersionRecord>> {
        Statement query(db(), std::string("SELECT ") + kVersionColumns +
                                  " FROM model_versions v WHERE task_id = ? ORDER BY version");
        query.bind(1, task_id);
        std::vector<VersionRecord> rows;
        while (query.step()) rows.push_back(read_version(query));
        return rows;
    });
}

common::Result<std::vector<VersionRecord>> VersionStore::versions_between(const std::string& task_id,
                                                                          std::int64_t after, std::int64_t through) {
    return reading([&]() -> common::Result<std::vector<VersionRecord>> {
        Statement query(db(), std::string("SELECT ") + kVersionColumns +
                                  " FROM model_versions v WHERE task_id = ? AND version > ? AND version <= ? "
                                  "ORDER BY version");
        query.bind(1, task_id).bind(2, after).bind(3, through);
        std::vector<VersionRecord> rows;
        while (query.step()) rows.push_back(read_version(query));
        return rows;
    });
}

common::Result<std::vector<VersionRecord>> VersionStore::versions_after_blob(const std::string& task_id,
                                                                             const std::string& held_sha256,
                                                                             std::int64_t through) {
    return reading([&]() -> common::Result<std::vector<VersionRecord>> {
        Statement query(db(),
                        std::string("SELECT ") + kVersionColumns +
                            " FROM model_versions v WHERE v.task_id = ? AND v.version <= ? AND v.version > "
                            "(SELECT MAX(h.version + 0) FROM model_versions h WHERE h.task_id = ? AND h.blob_sha256 = ?) "
                            "ORDER BY v.version");
        query.bind(1, task_id).bind(2, through).bind(3, task_id).bind(4, held_sha256);
        std::vector<VersionRecord> rows;
        while (query.step()) rows.push_back(read_version(query));
        return rows;
    });
}

common::Result<std::optional<VersionStore::BlobVersions>> VersionStore::versions_of_blob(const std::string& task_id,
                                                                                         const std::string& sha256) {
    return reading([&]() -> common::Result<std::optional<BlobVersions>> {
        Statement query(db(),
                        "SELECT MIN(version), MAX(version) FROM model_versions WHERE task_id = ? AND blob_sha256 = ?");
        query.bind(1, task_id).bind(2, sha256);
        if (!query.step() || query.is_null(0)) return std::optional<BlobVersions>();
        return std::optional<BlobVersions>(BlobVersions{query.integer(0), query.integer(1)});
    });
}

common::Result<std::optional<std::pair<std::string, std::int64_t>>> VersionStore::version_publishing(
    const std::string& sha256) {
    using Owner = std::optional<std::pair<std::string, std::int64_t>>;
    return reading([&]() -> common::Result<Owner> {
        // Task by task, so that the (task_id, blob_sha256) index serves each look-up.
        Statement query(db(),
                        "SELECT id, first FROM (SELECT t.id AS id, (SELECT MIN(v.version) FROM model_versions v "
                        "WHERE v.task_id = t.id AND v.blob_sha256 = ?) AS first FROM tasks t) AS owners "
                        "WHERE first IS NOT NULL LIMIT 1");
        query.bind(1, sha256);
        if (!query.step()) return Owner();
        return Owner(std::pair{query.text(0), query.integer(1)});
    });
}

common::Result<std::optional<VersionRecord>> VersionStore::last_checkpoint(const std::string& task_id,
                                                                           std::int64_t at_most) {
    return reading([&]() -> common::Result<std::optional<VersionRecord>> {
        Statement query(db(), std::string("SELECT ") + kVersionColumns +
                                  " FROM model_versions v WHERE task_id = ? AND version <= ? AND checkpoint = 1 "
                                  "ORDER BY version DESC LIMIT 1");
        query.bind(1, task_id).bind(2, at_most);
        if (!query.step()) return std::optional<VersionRecord>();
        return std::optional<VersionRecord>(read_version(query));
    });
}

common::Result<std::vector<VersionStore::MergedResult>> VersionStore::merged_between(const std::string& task_id,
                                                                                     std::int64_t after,
                                                                                     std::int64_t through) {
    return reading([&]() -> common::Result<std::vector<MergedResult>> {
        Statement query(db(),
                        "SELECT a.id, a.merged_version FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE w.task_id = ? AND a.state = 'merged' AND a.merged_version > ? "
                        "AND a.merged_version <= ? ORDER BY a.merged_version, a.accepted_seq");
        query.bind(1, task_id).bind(2, after).bind(3, through);
        std::vector<MergedResult> rows;
        while (query.step()) rows.push_back({query.text(0), query.integer(1)});
        return rows;
    });
}

common::Status VersionStore::set_checkpoint(const std::string& task_id, std::int64_t version,
                                            const std::optional<std::string>& state_sha256,
                                            const std::optional<std::string>& optimizer_sha256) {
    return guarded([&]() -> common::Status {
        Statement(db(),
                  "UPDATE model_versions SET checkpoint = 1, state_sha256 = COALESCE(?, state_sha256), "
                  "optimizer_sha256 = COALESCE(?, optimizer_sha256) WHERE task_id = ? AND version = ?")
            .bind(1, state_sha256)
            .bind(2, optimizer_sha256)
            .bind(3, task_id)
            .bind(4, version)
            .run();
        if (db().changes() != 1) return common::make_error("no version " + std::to_string(version));
        return {};
    });
}

common::Result<VersionStore::Retired> VersionStore::retire_versions(const std::string& task_id, std::int64_t keep) {
    return guarded([&]() -> common::Result<Retired> {
        Transaction transaction(db());
        auto first_kept = [&](const std::string& sql, std::int64_t argument) -> std::optional<std::int64_t> {
            Statement query(db(), sql);
            query.bind(1, task_id).bind(2, argument);
            if (!query.step() || query.is_null(0)) return std::nullopt;
            return query.integer(0);
        };
        auto before = first_kept(
            "SELECT version FROM model_versions WHERE task_id = ? AND checkpoint = 1 "
            "ORDER BY version DESC LIMIT 1 OFFSET ?",
            keep - 1);
        if (!before) return Retired{};
        Statement live(db(),
                       "SELECT MIN(w.base_version) FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                       "WHERE w.task_id = ? AND a.state IN ('in_progress', 'returned', 'validated', 'accepted')");
        live.bind(1, task_id);
        if (live.step() && !live.is_null(0)) {
            auto floor = first_kept(
                "SELECT MAX(version) FROM model_versions WHERE task_id = ? AND checkpoint = 1 AND version <= ?",
                live.integer(0));
            if (floor) before = std::min(*before, *floor);
        }
        std::set<std::string> candidates;
        Statement old(db(),
                      "SELECT blob_sha256, state_sha256, optimizer_sha256, patch_sha256 FROM model_versions "
                      "WHERE task_id = ? AND version < ? AND pinned = 0 AND (checkpoint = 1 OR "
                      "state_sha256 IS NOT NULL OR optimizer_sha256 IS NOT NULL OR patch_sha256 IS NOT NULL)");
        old.bind(1, task_id).bind(2, *before);
        while (old.step())
            for (int column = 0; column < 4; ++column)
                if (!old.is_null(column)) candidates.insert(old.text(column));
        if (candidates.empty()) return Retired{*before, {}};
        Statement(db(),
                  "UPDATE model_versions SET checkpoint = 0, state_sha256 = NULL, optimizer_sha256 = NULL, "
                  "patch_sha256 = NULL WHERE task_id = ? AND version < ? AND pinned = 0")
            .bind(1, task_id)
            .bind(2, *before)
            .run();
        Statement needed(db(),
                         "SELECT blob_sha256, state_sha256, optimizer_sha256, patch_sha256 FROM model_versions "
                         "WHERE task_id != ? OR version >= ? OR pinned = 1");
        needed.bind(1, task_id).bind(2, *before);
        while (needed.step())
            for (int column = 0; column < 4; ++column)
                if (!needed.is_null(column)) candidates.erase(needed.text(column));
        Statement shards(db(), "SELECT sha256 FROM shards");
        while (shards.step()) candidates.erase(shards.text(0));
        transaction.commit();
        return Retired{*before, {candidates.begin(), candidates.end()}};
    });
}

common::Result<bool> VersionStore::set_pinned(const std::string& task_id, std::int64_t version, bool pinned) {
    return guarded([&]() -> common::Result<bool> {
        Statement(db(), "UPDATE model_versions SET pinned = ? WHERE task_id = ? AND version = ? AND checkpoint = 1")
            .bind(1, std::int64_t{pinned ? 1 : 0})
            .bind(2, task_id)
            .bind(3, version)
            .run();
        return db().changes() == 1;
    });
}

namespace {

// Why a commit's guarded update changed no row: the task is gone, moved on, or its lease is
// another process's now.
std::string commit_refused(Database& db, const VersionRecord& version, const std::optional<LeaseClaim>& fence) {
    Statement current(db, "SELECT version FROM tasks WHERE id = ?");
    current.bind(1, version.task_id);
    if (!current.step()) return "no task '" + version.task_id + "'";
    if (current.integer(0) + 1 != version.version)
        return "version " + std::to_string(version.version) + " does not follow " + std::to_string(current.integer(0));
    return "lease '" + (fence ? fence->name : std::string()) + "' is no longer this process's";
}

}  // namespace

// Read committed on PostgreSQL: the task's row is updated (and so locked) first, only while
// the version follows and the lease is the caller's (two commits of one task run one after
// the other, the second sees the first's version; the lease row is share-locked until the
// commit), and each result's update re-checks its state. Serializable, its predicate locks
// over a whole batch of results would conflict with every acceptance running beside it
// (docs/scaling.md).
common::Status VersionStore::commit_version(const VersionRecord& version, const std::vector<std::string>& merged,
                                            const std::optional<LeaseClaim>& fence) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db(), Isolation::ReadCommitted);
        bool postgres = db().dialect() == Dialect::Postgres;
        std::string sql = "UPDATE tasks SET version = ? WHERE id = ? AND version = ?";
        if (fence)
            sql += std::string(" AND EXISTS (SELECT 1 FROM leases WHERE name = ? AND holder = ?") +
                   (postgres ? " FOR SHARE" : "") + ")";
        Statement advance(db(), sql);
        advance.bind(1, version.version).bind(2, version.task_id).bind(3, version.version - 1);
        if (fence) advance.bind(4, fence->name).bind(5, fence->holder);
        advance.run();
        if (db().changes() != 1) return common::make_error(commit_refused(db(), version, fence));
        insert_version(db(), version);
        for (const auto& id : merged) {
            Statement(db(),
                      "UPDATE assignments SET state = 'merged', merged_version = ? "
                      "WHERE id = ? AND state = 'accepted'")
                .bind(1, version.version)
                .bind(2, id)
                .run();
            if (db().changes() != 1) return common::make_error("result '" + id + "' is not waiting to be merged");
        }
        insert_event(db(), "version_merged",
                     {{"task_id", version.task_id},
                      {"version", version.version},
                      {"results", static_cast<std::int64_t>(merged.size())}},
                     version.created_at);
        transaction.commit();
        return {};
    });
}

common::Status VersionStore::set_validation_result(const std::string& task_id, std::int64_t version,
                                                   const ValidationResult& result) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(),
                  "UPDATE model_versions SET validation_loss = ?, validation_accuracy = ?, "
                  "validation_samples = ?, validation_full = ? WHERE task_id = ? AND version = ?")
            .bind(1, result.loss)
            .bind(2, result.accuracy)
            .bind(3, result.samples)
            .bind(4, std::int64_t{result.full ? 1 : 0})
            .bind(5, task_id)
            .bind(6, version)
            .run();
        if (db().changes() != 1) return common::make_error("no version " + std::to_string(version));
        boost::json::object detail{{"task_id", task_id},
                                   {"version", version},
                                   {"loss", result.loss},
                                   {"samples", result.samples},
                                   {"full", result.full}};
        if (result.accuracy) detail["accuracy"] = *result.accuracy;
        Statement when(db(), "SELECT created_at FROM model_versions WHERE task_id = ? AND version = ?");
        when.bind(1, task_id).bind(2, version).step();
        insert_event(db(), "evaluated", detail, when.integer(0));
        transaction.commit();
        return {};
    });
}

}  // namespace tessera::server
