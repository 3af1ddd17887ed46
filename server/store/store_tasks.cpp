// Store: tasks and their shards.
#include "store_internal.h"

#include <algorithm>
#include <limits>

namespace tessera::server {

TaskRecord read_task(const Statement& row, int first) {
    TaskRecord task;
    task.id = row.text(first);
    task.config_json = row.text(first + 1);
    auto state = task_state_from_name(row.text(first + 2));
    if (!state) throw DatabaseError("unknown task state '" + row.text(first + 2) + "'");
    task.state = *state;
    task.created_at = row.integer(first + 3);
    task.version = row.integer(first + 4);
    task.weight = row.real(first + 5);
    return task;
}

common::Status TaskStore::create_task(const TaskRecord& task, const std::vector<ShardRecord>& shards,
                                      const VersionRecord& version0) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement exists(db(), "SELECT 1 FROM tasks WHERE id = ?");
        exists.bind(1, task.id);
        if (exists.step()) return common::make_error("a task named '" + task.id + "' exists already");
        Statement(db(), "INSERT INTO tasks(id, config, state, created_at, version, weight) VALUES (?, ?, ?, ?, 0, ?)")
            .bind(1, task.id)
            .bind(2, task.config_json)
            .bind(3, task_state_name(task.state))
            .bind(4, task.created_at)
            .bind(5, task.weight)
            .run();
        for (const auto& shard : shards)
            Statement(db(), "INSERT INTO shards(task_id, sha256, bytes, samples) VALUES (?, ?, ?, ?)")
                .bind(1, task.id)
                .bind(2, shard.sha256)
                .bind(3, shard.bytes)
                .bind(4, shard.samples)
                .run();
        insert_version(db(), version0);
        insert_event(db(), "task_created", {{"task_id", task.id}}, task.created_at);
        transaction.commit();
        return {};
    });
}

common::Result<std::optional<TaskRecord>> TaskStore::current_task() {
    return reading([&]() -> common::Result<std::optional<TaskRecord>> {
        Statement query(db(),
                        std::string("SELECT ") + kTaskColumns +
                            " FROM tasks t WHERE state != 'finished' ORDER BY created_at DESC, rowid DESC LIMIT 1");
        if (!query.step()) return std::optional<TaskRecord>();
        return std::optional<TaskRecord>(read_task(query));
    });
}

common::Result<std::optional<TaskRecord>> TaskStore::task(const std::string& id) {
    return reading([&]() -> common::Result<std::optional<TaskRecord>> {
        Statement query(db(), std::string("SELECT ") + kTaskColumns + " FROM tasks t WHERE id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<TaskRecord>();
        return std::optional<TaskRecord>(read_task(query));
    });
}

common::Result<std::vector<TaskRecord>> TaskStore::tasks() {
    return reading([&]() -> common::Result<std::vector<TaskRecord>> {
        Statement query(db(), std::string("SELECT ") + kTaskColumns + " FROM tasks t ORDER BY created_at, rowid");
        std::vector<TaskRecord> rows;
        while (query.step()) rows.push_back(read_task(query));
        return rows;
    });
}

common::Status TaskStore::set_task_state(const std::string& id, TaskState state, std::int64_t now) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(), "UPDATE tasks SET state = ? WHERE id = ?").bind(1, task_state_name(state)).bind(2, id).run();
        if (db().changes() != 1) return common::make_error("no task '" + id + "'");
        insert_event(db(), "task_state", {{"task_id", id}, {"state", task_state_name(state)}}, now);
        transaction.commit();
        return {};
    });
}

common::Status TaskStore::set_task_weight(const std::string& id, double weight) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(), "UPDATE tasks SET weight = ? WHERE id = ?").bind(1, weight).bind(2, id).run();
        if (db().changes() != 1) return common::make_error("no task '" + id + "'");
        transaction.commit();
        return {};
    });
}

common::Result<std::int64_t> TaskStore::results_in_flight(const std::string& task_id) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(),
                        "SELECT COUNT(*) FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE w.task_id = ? AND a.state IN ('in_progress', 'returned', 'validated', 'accepted')");
        query.bind(1, task_id);
        query.step();
        return query.integer(0);
    });
}

// Another result returned in the same second counts as before: ids carry no order.
common::Result<bool> TaskStore::returned_before(const AssignmentRecord& a) {
    return reading([&]() -> common::Result<bool> {
        auto at = a.returned_at.value_or(std::numeric_limits<std::int64_t>::max());
        Statement query(db(),
                        "SELECT 1 FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE a.client_id = ? AND w.task_id = ? AND a.id != ? AND a.returned_at <= ? LIMIT 1");
        query.bind(1, a.client_id).bind(2, a.task_id).bind(3, a.id).bind(4, at);
        return query.step();
    });
}

common::Result<std::vector<ShardRecord>> TaskStore::shards(const std::string& task_id) {
    return reading([&]() -> common::Result<std::vector<ShardRecord>> {
        Statement query(db(), "SELECT sha256, bytes, samples, uses FROM shards WHERE task_id = ? ORDER BY rowid");
        query.bind(1, task_id);
        std::vector<ShardRecord> rows;
        while (query.step()) rows.push_back({query.text(0), query.integer(1), query.integer(2), query.integer(3)});
        return rows;
    });
}

}  // namespace tessera::server
