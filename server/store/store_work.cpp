// Store: work units, assignments and the lifecycle transitions between their states.
#include "store_internal.h"

namespace tessera::server {
namespace {

// Assignment states that still count towards a unit's replicas.
constexpr const char* kLiveStates = "('in_progress', 'returned', 'validated', 'accepted', 'confirmed', 'merged')";

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

void insert_assignment(Database& db, const AssignmentRecord& a) {
    Statement(db,
              "INSERT INTO assignments(id, work_unit_id, client_id, state, issued_at, deadline, envelope) "
              "VALUES (?, ?, ?, 'in_progress', ?, ?, ?)")
        .bind(1, a.id)
        .bind(2, a.work_unit_id)
        .bind(3, a.client_id)
        .bind(4, a.issued_at)
        .bind(5, a.deadline)
        .bind(6, a.envelope_json)
        .run();
    insert_event(db, "work_issued", {{"assignment_id", a.id}, {"client_id", a.client_id}}, a.issued_at);
}

// Moves one assignment between states; false when it was not in `from`.
bool transition(Database& db, const std::string& id, const char* from, const char* to) {
    Statement(db, std::string("UPDATE assignments SET state = '") + to + "' WHERE id = ? AND state IN " + from)
        .bind(1, id)
        .run();
    return db.changes() == 1;
}

std::int64_t units_in_progress(Database& db, const std::string& client_id) {
    Statement query(db, "SELECT COUNT(*) FROM assignments WHERE client_id = ? AND state = 'in_progress'");
    query.bind(1, client_id).step();
    return query.integer(0);
}

std::string work_unit_of(Database& db, const std::string& assignment_id) {
    Statement query(db, "SELECT work_unit_id FROM assignments WHERE id = ?");
    query.bind(1, assignment_id);
    if (!query.step()) throw DatabaseError("no assignment '" + assignment_id + "'");
    return query.text(0);
}

// Counts a failure against the unit; retires it at `max_failures`. True when retired.
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

}  // namespace

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

WorkUnitRecord read_work_unit(const Statement& row) {
    WorkUnitRecord w;
    w.id = row.text(0);
    w.task_id = row.text(1);
    w.base_version = row.integer(2);
    w.shards = shards_from_json(row.text(3));
    w.local_steps = row.integer(4);
    w.seed = row.integer(5);
    w.replicas = row.integer(6);
    w.state = work_unit_state_from_name(row.text(7));
    w.failures = row.integer(8);
    w.created_at = row.integer(9);
    return w;
}

common::Result<Store::Claim> Store::create_work_unit(const WorkUnitRecord& unit, const AssignmentRecord& first,
                                                     std::int64_t max_in_flight) {
    return guarded([&]() -> common::Result<Claim> {
        Transaction transaction(db());
        if (units_in_progress(db(), first.client_id) >= max_in_flight) return Claim::Busy;
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
        for (const auto& shard : unit.shards)
            Statement(db(), "UPDATE shards SET uses = uses + 1 WHERE task_id = ? AND sha256 = ?")
                .bind(1, unit.task_id)
                .bind(2, shard)
                .run();
        insert_assignment(db(), first);
        transaction.commit();
        return Claim::Made;
    });
}

common::Result<Store::Claim> Store::add_assignment(const AssignmentRecord& assignment,
                                                   std::optional<std::int64_t> rebase_to, std::int64_t max_in_flight) {
    return guarded([&]() -> common::Result<Claim> {
        Transaction transaction(db());
        Statement unit(db(), "SELECT state, replicas FROM work_units WHERE id = ?");
        unit.bind(1, assignment.work_unit_id);
        if (!unit.step()) return common::make_error("no work unit '" + assignment.work_unit_id + "'");
        if (unit.text(0) != "open") return Claim::Taken;  // retired since
        // Counted in the same transaction: another request or process may have given the unit
        // out (and rebased it) since the scheduler found it free, and a second holder would be
        // refused as computing from the wrong base (found by scripts/soak on PostgreSQL).
        Statement live(
            db(), std::string("SELECT COUNT(*) FROM assignments WHERE work_unit_id = ? AND state IN ") + kLiveStates);
        live.bind(1, assignment.work_unit_id).step();
        if (live.integer(0) >= unit.integer(1)) return Claim::Taken;
        if (units_in_progress(db(), assignment.client_id) >= max_in_flight) return Claim::Busy;
        if (rebase_to)
            Statement(db(), "UPDATE work_units SET base_version = ? WHERE id = ?")
                .bind(1, *rebase_to)
                .bind(2, assignment.work_unit_id)
                .run();
        insert_assignment(db(), assignment);
        transaction.commit();
        return Claim::Made;
    });
}

common::Result<std::vector<WorkUnitRecord>> Store::reissuable_work_units(const std::string& task_id,
                                                                         const std::string& client_id) {
    return guarded([&]() -> common::Result<std::vector<WorkUnitRecord>> {
        Statement query(
            db(), std::string("SELECT ") + kWorkUnitColumns +
                      " FROM work_units w WHERE task_id = ? AND state = 'open' "
                      "AND (SELECT COUNT(*) FROM assignments a WHERE a.work_unit_id = w.id AND a.state IN " +
                      kLiveStates +
                      ") < replicas "
                      "AND NOT EXISTS (SELECT 1 FROM assignments a WHERE a.work_unit_id = w.id AND a.client_id = ?) "
                      "ORDER BY created_at, rowid LIMIT 64");
        query.bind(1, task_id).bind(2, client_id);
        std::vector<WorkUnitRecord> rows;
        while (query.step()) rows.push_back(read_work_unit(query));
        return rows;
    });
}

common::Result<std::int64_t> Store::in_flight(const std::string& client_id) {
    return guarded([&]() -> common::Result<std::int64_t> { return units_in_progress(db(), client_id); });
}

common::Result<std::vector<std::string>> Store::tasks_in_progress(const std::string& client_id) {
    return guarded([&]() -> common::Result<std::vector<std::string>> {
        Statement query(db(),
                        "SELECT DISTINCT w.task_id FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE a.client_id = ? AND a.state = 'in_progress' ORDER BY w.task_id");
        query.bind(1, client_id);
        std::vector<std::string> tasks;
        while (query.step()) tasks.push_back(query.text(0));
        return tasks;
    });
}

common::Result<std::int64_t> Store::live_assignments(const std::string& work_unit_id) {
    return guarded([&]() -> common::Result<std::int64_t> {
        Statement query(
            db(), std::string("SELECT COUNT(*) FROM assignments WHERE work_unit_id = ? AND state IN ") + kLiveStates);
        query.bind(1, work_unit_id).step();
        return query.integer(0);
    });
}

common::Result<std::optional<AssignmentRecord>> Store::assignment(const std::string& id) {
    return guarded([&]() -> common::Result<std::optional<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id WHERE a.id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<AssignmentRecord>();
        return std::optional<AssignmentRecord>(read_assignment(query));
    });
}

common::Result<std::optional<WorkUnitRecord>> Store::work_unit(const std::string& id) {
    return guarded([&]() -> common::Result<std::optional<WorkUnitRecord>> {
        Statement query(db(), std::string("SELECT ") + kWorkUnitColumns + " FROM work_units WHERE id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<WorkUnitRecord>();
        return std::optional<WorkUnitRecord>(read_work_unit(query));
    });
}

common::Result<std::vector<AssignmentRecord>> Store::assignments_of(const std::string& work_unit_id) {
    return guarded([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.work_unit_id = ? ORDER BY a.issued_at, a.rowid");
        query.bind(1, work_unit_id);
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

common::Result<bool> Store::record_return(const std::string& id, const std::string& delta_sha256,
                                          std::int64_t delta_bytes, const std::string& metrics_json, std::int64_t now) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), id, "('in_progress')", "returned")) return false;
        Statement(db(),
                  "UPDATE assignments SET returned_at = ?, delta_sha256 = ?, delta_bytes = ?, metrics = ? "
                  "WHERE id = ?")
            .bind(1, now)
            .bind(2, delta_sha256)
            .bind(3, delta_bytes)
            .bind(4, metrics_json)
            .bind(5, id)
            .run();
        insert_event(db(), "result_received", {{"assignment_id", id}, {"bytes", delta_bytes}}, now);
        transaction.commit();
        return true;
    });
}

common::Result<bool> Store::mark_validated(const std::string& id, const CheckFigures& figures, std::int64_t now) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), id, "('returned')", "validated")) return false;
        Statement(db(),
                  "UPDATE assignments SET delta_norm = ?, gain_per_step = ?, alignment = ?, full_rate_steps = ?, "
                  "returned_at = ? WHERE id = ?")
            .bind(1, figures.norm)
            .bind(2, figures.gain_per_step)
            .bind(3, figures.alignment)
            .bind(4, figures.full_rate_steps)
            .bind(5, now)
            .bind(6, id)
            .run();
        transaction.commit();
        return true;
    });
}

common::Result<bool> Store::accept(const std::string& id, const CheckFigures& figures, double credit, bool merge,
                                   std::int64_t now, std::int64_t concurrency) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), id, "('returned', 'validated')", merge ? "accepted" : "confirmed")) return false;
        Statement next_seq(db(), "SELECT COALESCE(MAX(accepted_seq), 0) + 1 FROM assignments");
        next_seq.step();
        Statement(db(),
                  "UPDATE assignments SET delta_norm = ?, gain_per_step = ?, alignment = ?, credit = ?, accepted_seq = ?, "
                  "concurrency = ?, full_rate_steps = ? WHERE id = ?")
            .bind(1, figures.norm)
            .bind(2, figures.gain_per_step)
            .bind(3, figures.alignment)
            .bind(4, credit)
            .bind(5, next_seq.integer(0))
            .bind(6, concurrency)
            .bind(7, figures.full_rate_steps)
            .bind(8, id)
            .run();
        Statement client(db(), "SELECT client_id FROM assignments WHERE id = ?");
        client.bind(1, id).step();
        Statement(db(),
                  "UPDATE clients SET credit = credit + ?, accepted = accepted + 1, "
                  "valid_streak = valid_streak + 1 WHERE id = ?")
            .bind(1, credit)
            .bind(2, client.text(0))
            .run();
        auto unit = work_unit_of(db(), id);
        Statement(db(),
                  "UPDATE work_units SET state = 'done' WHERE id = ? AND state = 'open' AND replicas <= "
                  "(SELECT COUNT(*) FROM assignments WHERE work_unit_id = ? AND state IN "
                  "('accepted', 'confirmed', 'merged'))")
            .bind(1, unit)
            .bind(2, unit)
            .run();
        insert_event(db(), "result_accepted",
                     {{"assignment_id", id}, {"client_id", client.text(0)}, {"credit", credit}, {"merge", merge}}, now);
        transaction.commit();
        return true;
    });
}

common::Result<bool> Store::reject(const std::string& id, const std::string& reason, const std::string& detail,
                                   std::int64_t now, std::int64_t max_failures, const CheckFigures& figures) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), id, "('in_progress', 'returned', 'validated')", "rejected")) return false;
        if (figures.gain_per_step || figures.alignment)
            Statement(db(), "UPDATE assignments SET gain_per_step = ?, alignment = ? WHERE id = ?")
                .bind(1, figures.gain_per_step)
                .bind(2, figures.alignment)
                .bind(3, id)
                .run();
        Statement client(db(), "SELECT client_id FROM assignments WHERE id = ?");
        client.bind(1, id).step();
        auto client_id = client.text(0);
        Statement(db(), "INSERT INTO rejections(assignment_id, client_id, reason, detail, at) VALUES (?, ?, ?, ?, ?)")
            .bind(1, id)
            .bind(2, client_id)
            .bind(3, reason)
            .bind(4, detail)
            .bind(5, now)
            .run();
        Statement(db(), "UPDATE clients SET rejected = rejected + 1, valid_streak = 0 WHERE id = ?")
            .bind(1, client_id)
            .run();
        count_failure(db(), work_unit_of(db(), id), max_failures, now);
        insert_event(db(), "result_rejected", {{"assignment_id", id}, {"client_id", client_id}, {"reason", reason}},
                     now);
        transaction.commit();
        return true;
    });
}

common::Result<std::vector<EndedAssignment>> Store::expire_overdue(const std::string& task_id, std::int64_t now,
                                                                   std::int64_t max_failures) {
    return guarded([&]() -> common::Result<std::vector<EndedAssignment>> {
        Transaction transaction(db());
        Statement overdue(db(),
                          "SELECT a.id, a.work_unit_id FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                          "WHERE a.state = 'in_progress' AND a.deadline < ? AND w.task_id = ?");
        overdue.bind(1, now).bind(2, task_id);
        std::vector<EndedAssignment> ended;
        while (overdue.step()) ended.push_back({overdue.text(0), overdue.text(1), false});
        for (auto& e : ended) {
            transition(db(), e.assignment_id, "('in_progress')", "timed_out");
            Statement(db(),
                      "UPDATE clients SET valid_streak = 0 WHERE id = "
                      "(SELECT client_id FROM assignments WHERE id = ?)")
                .bind(1, e.assignment_id)
                .run();
            e.work_unit_retired = count_failure(db(), e.work_unit_id, max_failures, now);
            insert_event(db(), "work_timed_out", {{"assignment_id", e.assignment_id}}, now);
        }
        transaction.commit();
        return ended;
    });
}

common::Result<std::optional<EndedAssignment>> Store::abandon(const std::string& id, std::int64_t now,
                                                              std::int64_t max_failures) {
    return guarded([&]() -> common::Result<std::optional<EndedAssignment>> {
        Transaction transaction(db());
        if (!transition(db(), id, "('in_progress')", "abandoned")) return std::optional<EndedAssignment>();
        EndedAssignment ended{id, work_unit_of(db(), id), false};
        ended.work_unit_retired = count_failure(db(), ended.work_unit_id, max_failures, now);
        insert_event(db(), "work_abandoned", {{"assignment_id", id}}, now);
        transaction.commit();
        return std::optional<EndedAssignment>(ended);
    });
}

common::Result<std::vector<AssignmentRecord>> Store::in_state(AssignmentState state) {
    return guarded([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.state = ? ORDER BY a.returned_at, a.rowid");
        query.bind(1, assignment_state_name(state));
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

common::Result<std::vector<AssignmentRecord>> Store::accepted_unmerged(const std::string& task_id) {
    return guarded([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE w.task_id = ? AND a.state = 'accepted' ORDER BY a.accepted_seq");
        query.bind(1, task_id);
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

common::Result<std::vector<double>> Store::recent_norms_per_step(const std::string& task_id, int limit) {
    return guarded([&]() -> common::Result<std::vector<double>> {
        // Walks the acceptance index from the newest (on SQLite, CROSS JOIN and the unary + keep
        // its planner from scanning every accepted row of the task and sorting them).
        bool sqlite = db().dialect() == Dialect::Sqlite;
        Statement query(db(), std::string("SELECT a.delta_norm / COALESCE(a.full_rate_steps, w.local_steps) FROM assignments a ") +
                                  (sqlite ? "CROSS JOIN" : "JOIN") +
                                  " work_units w ON w.id = a.work_unit_id WHERE a.accepted_seq IS NOT NULL AND "
                                  "w.task_id = ? AND " +
                                  (sqlite ? "+a.state" : "a.state") +
                                  " IN ('accepted', 'confirmed', 'merged') AND a.delta_norm IS NOT NULL "
                                  "ORDER BY a.accepted_seq DESC LIMIT ?");
        query.bind(1, task_id).bind(2, limit);
        std::vector<double> norms;
        while (query.step()) norms.push_back(query.real(0));
        return norms;
    });
}

common::Result<std::vector<double>> Store::recent_gains_per_step(const std::string& task_id, int limit,
                                                                 std::int64_t min_base_version) {
    return guarded([&]() -> common::Result<std::vector<double>> {
        Statement query(db(),
                        "SELECT a.gain_per_step FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE w.task_id = ? AND a.gain_per_step IS NOT NULL AND w.base_version >= ? "
                        "ORDER BY a.returned_at DESC, a.rowid DESC LIMIT ?");
        query.bind(1, task_id).bind(2, min_base_version).bind(3, limit);
        std::vector<double> gains;
        while (query.step()) gains.push_back(query.real(0));
        return gains;
    });
}

common::Status Store::set_replicas(const std::string& work_unit_id, std::int64_t replicas) {
    return guarded([&]() -> common::Status {
        Statement(db(), "UPDATE work_units SET replicas = ? WHERE id = ?").bind(1, replicas).bind(2, work_unit_id).run();
        return {};
    });
}

common::Result<std::vector<AssignmentRecord>> Store::lonely_validated(const std::string& task_id, std::int64_t now,
                                                                      std::int64_t wait_s) {
    return guarded([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.state = 'validated' AND a.returned_at < ? AND w.task_id = ? AND NOT EXISTS "
                                  "(SELECT 1 FROM assignments b WHERE b.work_unit_id = a.work_unit_id "
                                  "AND b.id != a.id AND b.state IN ('in_progress', 'returned'))");
        query.bind(1, now - wait_s).bind(2, task_id);
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

}  // namespace tessera::server
