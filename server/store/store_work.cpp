// Store: work units and their assignments, from creation to being handed out.
#include "store_internal.h"

#include "json_strict.h"
#include "protocol.h"

namespace tessera::server {
namespace {

// Assignment states that still count towards a unit's replicas.
constexpr const char* kLiveStates = "('in_progress', 'returned', 'validated', 'accepted', 'confirmed', 'merged')";

// The condition on a unit `w` that it can be given to the volunteer bound to its one parameter:
// open, a replica slot free, never held by that volunteer.
const std::string kReissuableTo = std::string(
                                      "w.state = 'open' AND (SELECT COUNT(*) FROM assignments a WHERE "
                                      "a.work_unit_id = w.id AND a.state IN ") +
                                  kLiveStates +
                                  ") < w.replicas AND NOT EXISTS (SELECT 1 FROM assignments a WHERE "
                                  "a.work_unit_id = w.id AND a.client_id = ?)";

std::string shards_to_json(const std::vector<std::string>& shards) {
    boost::json::array array;
    for (const auto& shard : shards) array.emplace_back(shard);
    return boost::json::serialize(array);
}

std::vector<std::string> shards_from_json(const std::string& text) {
    std::vector<std::string> shards;
    auto parsed = boost::json::parse(text);
    for (const auto& value : parsed.as_array()) shards.emplace_back(value.as_string());
    return shards;
}

// Inserts the assignment in progress while its volunteer holds fewer than `max_in_flight` units
// in progress and, for a unit that exists already (`existing_unit`), while that unit is open with
// a replica slot free: the claim's guards and its write in one statement. False when a guard
// failed (nothing written). The volunteer's last issue of the task is moved up with it.
bool insert_assignment(Database& db, const AssignmentRecord& a, std::int64_t max_in_flight, bool existing_unit) {
    std::string sql =
        "INSERT INTO assignments(id, work_unit_id, client_id, state, issued_at, deadline, envelope) "
        "SELECT ?, ?, ?, 'in_progress', ?, ?, ? ";
    if (existing_unit)
        sql += std::string(
                   "FROM work_units w WHERE w.id = ? AND w.state = 'open' AND (SELECT COUNT(*) FROM "
                   "assignments l WHERE l.work_unit_id = w.id AND l.state IN ") +
               kLiveStates + ") < w.replicas AND ";
    else
        sql += "WHERE ";
    sql += "(SELECT COUNT(*) FROM assignments b WHERE b.client_id = ? AND b.state = 'in_progress') < ?";
    Statement insert(db, sql);
    insert.bind(1, a.id).bind(2, a.work_unit_id).bind(3, a.client_id).bind(4, a.issued_at).bind(5, a.deadline);
    insert.bind(6, a.envelope_json);
    int next = 7;
    if (existing_unit) insert.bind(next++, a.work_unit_id);
    insert.bind(next, a.client_id).bind(next + 1, max_in_flight).run();
    if (db.changes() != 1) return false;
    Statement(db,
              "INSERT INTO task_volunteers(task_id, client_id, last_issued_at) SELECT w.task_id, ?, ? FROM "
              "work_units w WHERE w.id = ? ON CONFLICT (task_id, client_id) DO UPDATE SET last_issued_at = "
              "excluded.last_issued_at WHERE excluded.last_issued_at > task_volunteers.last_issued_at")
        .bind(1, a.client_id)
        .bind(2, a.issued_at)
        .bind(3, a.work_unit_id)
        .run();
    insert_event(db, "work_issued", {{"assignment_id", a.id}, {"client_id", a.client_id}}, a.issued_at);
    return true;
}

std::int64_t units_in_progress(Database& db, const std::string& client_id) {
    Statement query(db, "SELECT COUNT(*) FROM assignments WHERE client_id = ? AND state = 'in_progress'");
    query.bind(1, client_id).step();
    return query.integer(0);
}

}  // namespace

std::string skip_locked(Database& db, std::string_view table) {
    if (db.dialect() != Dialect::Postgres) return {};
    return " FOR UPDATE" + (table.empty() ? std::string() : " OF " + std::string(table)) + " SKIP LOCKED";
}

bool transition(Database& db, const std::string& id, const char* from, const char* to) {
    Statement(db, std::string("UPDATE assignments SET state = '") + to + "' WHERE id = ? AND state IN " + from)
        .bind(1, id)
        .run();
    return db.changes() == 1;
}

std::string work_unit_of(Database& db, const std::string& assignment_id) {
    Statement query(db, "SELECT work_unit_id FROM assignments WHERE id = ?");
    query.bind(1, assignment_id);
    if (!query.step()) throw DatabaseError("no assignment '" + assignment_id + "'");
    return query.text(0);
}

bool count_failure(Database& db, const std::string& unit_id, std::int64_t max_failures, std::int64_t now) {
    Statement(db, "UPDATE work_units SET failures = failures + 1 WHERE id = ?").bind(1, unit_id).run();
    Statement(db, "UPDATE work_units SET state = 'retired' WHERE id = ? AND state = 'open' AND failures >= ?")
        .bind(1, unit_id)
        .bind(2, max_failures)
        .run();
    bool retired = db.changes() == 1;
    if (retired) insert_event(db, "work_unit_retired", {{"work_unit_id", unit_id}}, now);
    return retired;
}

AssignmentRecord read_assignment(const Statement& row) {
    AssignmentRecord a;
    a.id = row.text(0);
    a.work_unit_id = row.text(1);
    a.client_id = row.text(2);
    auto state = assignment_state_from_name(row.text(3));
    if (!state) throw DatabaseError("unknown assignment state '" + row.text(3) + "'");
    a.state = *state;
    a.issued_at = row.integer(4);
    a.deadline = row.integer(5);
    a.envelope_json = row.text(6);
    a.returned_at = row.optional_integer(7);
    if (!row.is_null(8)) a.delta_sha256 = row.text(8);
    a.delta_bytes = row.optional_integer(9);
    a.delta_norm = row.optional_real(10);
    if (!row.is_null(11)) a.metrics_json = row.text(11);
    a.credit = row.real(12);
    a.merged_version = row.optional_integer(13);
    a.task_id = row.text(14);
    a.base_version = row.integer(15);
    a.gain_per_step = row.optional_real(16);
    a.alignment = row.optional_real(17);
    a.concurrency = row.optional_integer(18);
    a.full_rate_steps = row.optional_real(19);
    return a;
}

WorkUnitRecord read_work_unit(const Statement& row, int first) {
    WorkUnitRecord w;
    w.id = row.text(first);
    w.task_id = row.text(first + 1);
    w.base_version = row.integer(first + 2);
    w.shards = shards_from_json(row.text(first + 3));
    w.local_steps = row.integer(first + 4);
    w.seed = row.integer(first + 5);
    w.replicas = row.integer(first + 6);
    w.state = work_unit_state_from_name(row.text(first + 7));
    w.failures = row.integer(first + 8);
    w.created_at = row.integer(first + 9);
    w.trusted_only = row.integer(first + 10) != 0;
    if (!row.is_null(first + 11)) w.moments_sha256 = row.text(first + 11);
    w.moments_bytes = row.integer(first + 12);
    if (!row.is_null(first + 13)) w.checks = row.text(first + 13);
    if (!row.is_null(first + 14)) w.checks_client = row.text(first + 14);
    if (!row.is_null(first + 15)) w.check_spec = row.text(first + 15);
    return w;
}

common::Result<WorkStore::Claim> WorkStore::create_work_unit(const WorkUnitRecord& unit, const AssignmentRecord& first,
                                                             std::int64_t max_in_flight) {
    return guarded([&]() -> common::Result<Claim> {
        Transaction transaction(db());
        Statement(db(),
                  "INSERT INTO work_units(id, task_id, base_version, shards, local_steps, seed, replicas, "
                  "state, failures, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', 0, ?)")
            .bind(1, unit.id)
            .bind(2, unit.task_id)
            .bind(3, unit.base_version)
            .bind(4, shards_to_json(unit.shards))
            .bind(5, unit.local_steps)
            .bind(6, unit.seed)
            .bind(7, unit.replicas)
            .bind(8, unit.created_at)
            .run();
        if (!insert_assignment(db(), first, max_in_flight, false)) return Claim::Busy;  // the unit rolled back
        for (const auto& shard : unit.shards)
            Statement(db(), "UPDATE shards SET uses = uses + 1 WHERE task_id = ? AND sha256 = ?")
                .bind(1, unit.task_id)
                .bind(2, shard)
                .run();
        transaction.commit();
        return Claim::Made;
    });
}

common::Result<WorkStore::Claim> WorkStore::add_assignment(const AssignmentRecord& assignment,
                                                           std::optional<std::int64_t> rebase_to,
                                                           std::int64_t max_in_flight) {
    return guarded([&]() -> common::Result<Claim> {
        Transaction transaction(db());
        // Guarded in the same statement: another request or process may have given the unit out
        // (and rebased it) since the scheduler found it free, and a second holder would be
        // refused as computing from the wrong base (found by scripts/soak on PostgreSQL).
        if (!insert_assignment(db(), assignment, max_in_flight, true)) {
            if (units_in_progress(db(), assignment.client_id) >= max_in_flight) return Claim::Busy;
            return Claim::Taken;  // retired, or its replicas given out, since
        }
        if (rebase_to)
            Statement(db(), "UPDATE work_units SET base_version = ? WHERE id = ?")
                .bind(1, *rebase_to)
                .bind(2, assignment.work_unit_id)
                .run();
        transaction.commit();
        return Claim::Made;
    });
}

common::Result<std::vector<WorkUnitRecord>> WorkStore::reissuable_work_units(const std::string& task_id,
                                                                             const std::string& client_id) {
    return reading([&]() -> common::Result<std::vector<WorkUnitRecord>> {
        Statement query(db(), std::string("SELECT ") + kWorkUnitColumns + " FROM work_units w WHERE task_id = ? AND " +
                                  kReissuableTo + " ORDER BY created_at, rowid LIMIT 64");
        query.bind(1, task_id).bind(2, client_id);
        std::vector<WorkUnitRecord> rows;
        while (query.step()) rows.push_back(read_work_unit(query));
        return rows;
    });
}

common::Result<WorkView> WorkStore::work_view(const std::string& client_id, std::int64_t active_since) {
    return reading([&]() -> common::Result<WorkView> {
        // "version + 0": SQLite's MIN optimisation would walk the task's versions in order
        // instead of the few rows the (task_id, blob_sha256) index finds.
        Statement query(
            db(), std::string("SELECT ") + kTaskColumns + ", " + kVersionColumns +
                      ", (SELECT MIN(p.version + 0) FROM model_versions p WHERE p.task_id = t.id AND "
                      "p.blob_sha256 = v.blob_sha256), CASE WHEN t.state = 'active' AND EXISTS (SELECT 1 FROM "
                      "work_units w WHERE w.task_id = t.id AND " +
                      kReissuableTo +
                      ") THEN 1 ELSE 0 END, (SELECT COUNT(*) FROM assignments WHERE client_id = ? AND state = "
                      "'in_progress'), (SELECT COUNT(*) FROM (SELECT 1 FROM clients WHERE last_seen >= ? LIMIT 2) "
                      "AS recent) FROM tasks t LEFT JOIN model_versions v ON v.task_id = t.id AND v.version = "
                      "t.version ORDER BY t.created_at, t.rowid");
        query.bind(1, client_id).bind(2, client_id).bind(3, active_since);
        WorkView view;
        constexpr int kAfter = kTaskColumnCount + kVersionColumnCount;
        while (query.step()) {
            TaskAtWork task{read_task(query), std::nullopt, 0, false};
            if (!query.is_null(kTaskColumnCount)) {
                task.current = read_version(query, kTaskColumnCount);
                task.published_version = query.integer(kAfter);
            }
            task.reissuable = query.integer(kAfter + 1) != 0;
            view.in_flight = query.integer(kAfter + 2);
            view.active_clients = query.integer(kAfter + 3);
            view.tasks.push_back(std::move(task));
        }
        return view;
    });
}

common::Result<std::int64_t> WorkStore::in_flight(const std::string& client_id) {
    return reading([&]() -> common::Result<std::int64_t> { return units_in_progress(db(), client_id); });
}

common::Result<std::vector<std::string>> WorkStore::tasks_in_progress(const std::string& client_id) {
    return reading([&]() -> common::Result<std::vector<std::string>> {
        Statement query(db(),
                        "SELECT DISTINCT w.task_id FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE a.client_id = ? AND a.state = 'in_progress' ORDER BY w.task_id");
        query.bind(1, client_id);
        std::vector<std::string> tasks;
        while (query.step()) tasks.push_back(query.text(0));
        return tasks;
    });
}

common::Result<std::int64_t> WorkStore::live_assignments(const std::string& work_unit_id) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(
            db(), std::string("SELECT COUNT(*) FROM assignments WHERE work_unit_id = ? AND state IN ") + kLiveStates);
        query.bind(1, work_unit_id).step();
        return query.integer(0);
    });
}

common::Result<std::optional<AssignmentRecord>> WorkStore::assignment(const std::string& id) {
    return reading([&]() -> common::Result<std::optional<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id WHERE a.id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<AssignmentRecord>();
        return std::optional<AssignmentRecord>(read_assignment(query));
    });
}

common::Result<std::optional<WorkUnitRecord>> WorkStore::work_unit(const std::string& id) {
    return reading([&]() -> common::Result<std::optional<WorkUnitRecord>> {
        Statement query(db(), std::string("SELECT ") + kWorkUnitColumns + " FROM work_units w WHERE id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<WorkUnitRecord>();
        return std::optional<WorkUnitRecord>(read_work_unit(query));
    });
}

void add_check_blobs(Database& db, std::set<std::string>& blobs) {
    Statement query(db, "SELECT check_spec FROM work_units WHERE check_spec IS NOT NULL AND state = 'open'");
    while (query.step()) {
        auto spec = common::parse_json_strict(query.text(0));
        auto check = spec ? common::loss_check_from_json(*spec) : common::Result<common::LossCheck>(spec.error());
        if (!check) continue;  // a unit the scheduler retires when it is asked for: nothing to keep
        blobs.insert(check->result.sha256);
        blobs.insert(check->held_out.sha256);
    }
}

common::Result<bool> WorkStore::create_check_unit(const WorkUnitRecord& unit) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        Statement(db(),
                  "INSERT INTO work_units(id, task_id, base_version, shards, local_steps, seed, replicas, state, "
                  "failures, created_at, trusted_only, checks, checks_client, check_spec) "
                  "VALUES (?, ?, ?, ?, ?, ?, 1, 'open', 0, ?, 1, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
            .bind(1, unit.id)
            .bind(2, unit.task_id)
            .bind(3, unit.base_version)
            .bind(4, shards_to_json(unit.shards))
            .bind(5, unit.local_steps)
            .bind(6, unit.seed)
            .bind(7, unit.created_at)
            .bind(8, unit.checks)
            .bind(9, unit.checks_client)
            .bind(10, unit.check_spec)
            .run();
        bool made = db().changes() == 1;
        transaction.commit();
        return made;
    });
}

common::Result<bool> WorkStore::check_blob_in_use(const std::string& sha256) {
    return reading([&]() -> common::Result<bool> {
        // A hash is hex: nothing in it is a LIKE wildcard.
        Statement query(db(), "SELECT 1 FROM work_units WHERE state = 'open' AND check_spec LIKE ? LIMIT 1");
        query.bind(1, "%" + sha256 + "%");
        return query.step();
    });
}

common::Status WorkStore::retire_open_unit(const std::string& id) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(), "UPDATE work_units SET state = 'retired' WHERE id = ? AND state = 'open'").bind(1, id).run();
        transaction.commit();
        return {};
    });
}

common::Result<bool> WorkStore::moments_in_use(const std::string& sha256) {
    return reading([&]() -> common::Result<bool> {
        Statement query(db(), "SELECT 1 FROM work_units WHERE moments_sha256 = ? AND state = 'open' LIMIT 1");
        query.bind(1, sha256);
        return query.step();
    });
}

common::Result<std::vector<AssignmentRecord>> WorkStore::assignments_of(const std::string& work_unit_id) {
    return reading([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.work_unit_id = ? ORDER BY a.issued_at, a.rowid");
        query.bind(1, work_unit_id);
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

}  // namespace tessera::server
