// Store: a result's lifecycle after its upload — returned, validated, accepted or rejected,
// overdue, abandoned — and the figures of past results the contribution checks compare with.
#include "store_internal.h"

namespace tessera::server {

namespace {

// Names `claim` on the assignment's row, inside the caller's transaction.
void set_claim(Database& db, const std::string& id, const ResultClaim& claim) {
    Statement(db, "UPDATE assignments SET claimed_by = ?, claimed_until = ? WHERE id = ?")
        .bind(1, claim.holder)
        .bind(2, claim.until)
        .bind(3, id)
        .run();
}

}  // namespace

common::Result<bool> ResultStore::record_return(const std::string& id, const std::string& delta_sha256,
                                                std::int64_t delta_bytes, const std::string& metrics_json,
                                                std::int64_t now, const ResultClaim& claim,
                                                const std::string& commitments_json) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), id, "('in_progress')", "returned")) return false;
        Statement update(db(),
                         "UPDATE assignments SET returned_at = ?, delta_sha256 = ?, delta_bytes = ?, metrics = ?, "
                         "claimed_by = ?, claimed_until = ?, commitments = ? WHERE id = ?");
        update.bind(1, now).bind(2, delta_sha256).bind(3, delta_bytes).bind(4, metrics_json);
        if (claim.holder.empty())
            update.bind_null(5).bind_null(6);
        else
            update.bind(5, claim.holder).bind(6, claim.until);
        if (commitments_json.empty())
            update.bind_null(7);
        else
            update.bind(7, commitments_json);
        update.bind(8, id).run();
        insert_event(db(), "result_received", {{"assignment_id", id}, {"bytes", delta_bytes}}, now);
        transaction.commit();
        return true;
    });
}

common::Result<std::optional<std::string>> ResultStore::commitments_of(const std::string& id) {
    return reading([&]() -> common::Result<std::optional<std::string>> {
        Statement select(db(), "SELECT commitments FROM assignments WHERE id = ?");
        select.bind(1, id);
        if (!select.step() || select.is_null(0)) return std::optional<std::string>();
        return std::optional<std::string>(select.text(0));
    });
}

common::Result<bool> ResultStore::mark_validated(const std::string& id, const CheckFigures& figures, std::int64_t now) {
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

common::Result<bool> ResultStore::accept(const AssignmentRecord& a, const CheckFigures& figures, double credit,
                                         bool merge, std::int64_t now, std::int64_t concurrency) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        const auto& id = a.id;
        if (!transition(db(), id, "('returned', 'validated')", merge ? "accepted" : "confirmed")) return false;
        const auto& client_id = a.client_id;
        const auto& unit = a.work_unit_id;
        Statement(db(),
                  "UPDATE assignments SET delta_norm = ?, gain_per_step = ?, alignment = ?, credit = ?, accepted_seq = "
                  "(SELECT COALESCE(MAX(accepted_seq), 0) + 1 FROM assignments), concurrency = ?, full_rate_steps = ? "
                  "WHERE id = ?")
            .bind(1, figures.norm)
            .bind(2, figures.gain_per_step)
            .bind(3, figures.alignment)
            .bind(4, credit)
            .bind(5, concurrency)
            .bind(6, figures.full_rate_steps)
            .bind(7, id)
            .run();
        Statement(db(),
                  "UPDATE clients SET credit = credit + ?, accepted = accepted + 1, "
                  "valid_streak = valid_streak + 1 WHERE id = ?")
            .bind(1, credit)
            .bind(2, client_id)
            .run();
        Statement(db(),
                  "UPDATE work_units SET state = 'done' WHERE id = ? AND state = 'open' AND replicas <= "
                  "(SELECT COUNT(*) FROM assignments WHERE work_unit_id = ? AND state IN "
                  "('accepted', 'confirmed', 'merged'))")
            .bind(1, unit)
            .bind(2, unit)
            .run();
        insert_event(db(), "result_accepted",
                     {{"assignment_id", id}, {"client_id", client_id}, {"credit", credit}, {"merge", merge}}, now);
        transaction.commit();
        return true;
    });
}

common::Result<bool> ResultStore::reject(const std::string& id, const std::string& reason, const std::string& detail,
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
        Statement row(db(), "SELECT client_id, work_unit_id FROM assignments WHERE id = ?");
        if (!row.bind(1, id).step()) throw DatabaseError("no assignment '" + id + "'");
        const auto client_id = row.text(0);
        const auto unit = row.text(1);
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
        count_failure(db(), unit, max_failures, now);
        insert_event(db(), "result_rejected", {{"assignment_id", id}, {"client_id", client_id}, {"reason", reason}},
                     now);
        transaction.commit();
        return true;
    });
}

common::Result<std::vector<EndedAssignment>> ResultStore::expire_overdue(const std::string& task_id, std::int64_t now,
                                                                         std::int64_t max_failures) {
    return guarded([&]() -> common::Result<std::vector<EndedAssignment>> {
        // A claim, as claim_returned's: on PostgreSQL the overdue rows are locked and those
        // another process is timing out are skipped, so each times out once, without conflict.
        Transaction transaction(db(), Isolation::ReadCommitted);
        Statement overdue(db(),
                          "SELECT a.id, a.work_unit_id FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                          "WHERE a.state = 'in_progress' AND a.deadline < ? AND w.task_id = ?" +
                              skip_locked(db(), "a"));
        overdue.bind(1, now).bind(2, task_id);
        std::vector<EndedAssignment> found;
        while (overdue.step()) found.push_back({overdue.text(0), overdue.text(1), false});
        std::vector<EndedAssignment> ended;
        for (auto& e : found) {
            if (!transition(db(), e.assignment_id, "('in_progress')", "timed_out")) continue;
            Statement(db(),
                      "UPDATE clients SET valid_streak = 0 WHERE id = "
                      "(SELECT client_id FROM assignments WHERE id = ?)")
                .bind(1, e.assignment_id)
                .run();
            e.work_unit_retired = count_failure(db(), e.work_unit_id, max_failures, now);
            insert_event(db(), "work_timed_out", {{"assignment_id", e.assignment_id}}, now);
            ended.push_back(e);
        }
        transaction.commit();
        return ended;
    });
}

common::Result<std::optional<EndedAssignment>> ResultStore::abandon(const std::string& id, std::int64_t now,
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

common::Result<std::vector<std::string>> ResultStore::claim_returned(const ResultClaim& claim, std::int64_t now,
                                                                     std::size_t limit,
                                                                     const std::vector<std::string>& released) {
    return guarded([&]() -> common::Result<std::vector<std::string>> {
        // Read committed: the rows are locked and skipped, not compared for serializability,
        // so a claim never makes a concurrent upload or verdict fail as a conflict.
        Transaction transaction(db(), Isolation::ReadCommitted);
        std::string gone;
        for (std::size_t i = 0; i < released.size(); ++i) gone += i ? ", ?" : " OR claimed_by IN (?";
        if (!released.empty()) gone += ")";
        Statement unclaimed(db(),
                            "SELECT id FROM assignments WHERE state = 'returned' AND (claimed_by IS NULL OR "
                            "claimed_until <= ?" +
                                gone + ") ORDER BY returned_at, rowid LIMIT ?" + skip_locked(db()));
        int at = 1;
        unclaimed.bind(at++, now);
        for (const auto& holder : released) unclaimed.bind(at++, holder);
        unclaimed.bind(at, static_cast<std::int64_t>(limit));
        std::vector<std::string> ids;
        while (unclaimed.step()) ids.push_back(unclaimed.text(0));
        for (const auto& id : ids) set_claim(db(), id, claim);
        transaction.commit();
        return ids;
    });
}

common::Result<bool> ResultStore::renew_result_claim(const std::string& id, const ResultClaim& claim) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db(), Isolation::ReadCommitted);  // one row, as a claim's
        Statement(db(),
                  "UPDATE assignments SET claimed_until = ? WHERE id = ? AND state = 'returned' AND claimed_by = ?")
            .bind(1, claim.until)
            .bind(2, id)
            .bind(3, claim.holder)
            .run();
        bool renewed = db().changes() == 1;
        transaction.commit();
        return renewed;
    });
}

common::Result<bool> ResultStore::confirm_check_answer(const AssignmentRecord& a, double credit, std::int64_t now) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (!transition(db(), a.id, "('returned')", "confirmed")) return false;
        Statement(db(), "UPDATE assignments SET credit = ? WHERE id = ?").bind(1, credit).bind(2, a.id).run();
        Statement(db(),
                  "UPDATE clients SET credit = credit + ?, accepted = accepted + 1, valid_streak = valid_streak + 1 "
                  "WHERE id = ?")
            .bind(1, credit)
            .bind(2, a.client_id)
            .run();
        Statement(db(), "UPDATE work_units SET state = 'done' WHERE id = ? AND state = 'open'")
            .bind(1, a.work_unit_id)
            .run();
        insert_event(db(), "result_accepted",
                     {{"assignment_id", a.id}, {"client_id", a.client_id}, {"credit", credit}, {"merge", false}}, now);
        transaction.commit();
        return true;
    });
}

common::Result<bool> ResultStore::hold_result(const std::string& id, const std::string& metrics_json,
                                              std::int64_t until) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db(), Isolation::ReadCommitted);  // one row, as a claim's
        Statement(db(), "UPDATE assignments SET metrics = ?, claimed_until = ? WHERE id = ? AND state = 'returned'")
            .bind(1, metrics_json)
            .bind(2, until)
            .bind(3, id)
            .run();
        bool held = db().changes() == 1;
        transaction.commit();
        return held;
    });
}

common::Result<std::vector<std::string>> ResultStore::result_claim_holders() {
    return reading([&]() -> common::Result<std::vector<std::string>> {
        Statement query(db(),
                        "SELECT DISTINCT claimed_by FROM assignments WHERE state = 'returned' AND claimed_by IS NOT "
                        "NULL ORDER BY claimed_by");
        std::vector<std::string> holders;
        while (query.step()) holders.push_back(query.text(0));
        return holders;
    });
}

common::Result<std::int64_t> ResultStore::release_result_claims(const std::string& holder) {
    return guarded([&]() -> common::Result<std::int64_t> {
        Transaction transaction(db());
        Statement(db(),
                  "UPDATE assignments SET claimed_by = NULL, claimed_until = NULL WHERE state = 'returned' AND "
                  "claimed_by = ?")
            .bind(1, holder)
            .run();
        auto released = db().changes();
        transaction.commit();
        return released;
    });
}

common::Result<std::vector<AssignmentRecord>> ResultStore::in_state(AssignmentState state) {
    return reading([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.state = ? ORDER BY a.returned_at, a.rowid");
        query.bind(1, assignment_state_name(state));
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        return rows;
    });
}

common::Result<std::vector<AcceptedResult>> ResultStore::accepted_after(const std::string& task_id,
                                                                        std::int64_t after_seq) {
    return reading([&]() -> common::Result<std::vector<AcceptedResult>> {
        Statement query(db(),
                        "SELECT a.id, a.accepted_seq, w.base_version, COALESCE(a.concurrency, 1) FROM assignments a "
                        "JOIN work_units w ON w.id = a.work_unit_id WHERE a.accepted_seq > ? AND a.state = 'accepted' "
                        "AND w.task_id = ? ORDER BY a.accepted_seq");
        query.bind(1, after_seq);
        query.bind(2, task_id);
        std::vector<AcceptedResult> rows;
        while (query.step()) rows.push_back({query.text(0), query.integer(1), query.integer(2), query.integer(3)});
        return rows;
    });
}

common::Result<std::vector<double>> ResultStore::recent_gains_per_step(const std::string& task_id, int limit,
                                                                       std::int64_t min_base_version,
                                                                       double min_full_rate_steps) {
    return reading([&]() -> common::Result<std::vector<double>> {
        Statement query(db(),
                        "SELECT a.gain_per_step FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE w.task_id = ? AND a.gain_per_step IS NOT NULL AND w.base_version >= ? "
                        "AND COALESCE(a.full_rate_steps, w.local_steps) >= ? "
                        "ORDER BY a.returned_at DESC, a.rowid DESC LIMIT ?");
        query.bind(1, task_id).bind(2, min_base_version).bind(3, min_full_rate_steps).bind(4, limit);
        std::vector<double> gains;
        while (query.step()) gains.push_back(query.real(0));
        return gains;
    });
}

common::Status ResultStore::set_replicas(const std::string& work_unit_id, std::int64_t replicas) {
    return guarded([&]() -> common::Status {
        Statement(db(), "UPDATE work_units SET replicas = ? WHERE id = ?")
            .bind(1, replicas)
            .bind(2, work_unit_id)
            .run();
        return {};
    });
}

common::Result<bool> ResultStore::make_audit_twin(const std::string& work_unit_id, const std::string& moments_sha256,
                                                  std::int64_t moments_bytes) {
    return guarded([&]() -> common::Result<bool> {
        Statement update(db(),
                         "UPDATE work_units SET replicas = 2, trusted_only = 1, moments_sha256 = ?, moments_bytes = ? "
                         "WHERE id = ? AND replicas = 1");
        if (moments_sha256.empty())
            update.bind_null(1).bind(2, std::int64_t{0});
        else
            update.bind(1, moments_sha256).bind(2, moments_bytes);
        update.bind(3, work_unit_id).run();
        return db().changes() == 1;
    });
}

common::Result<std::vector<AssignmentRecord>> ResultStore::claim_lonely_validated(const std::string& task_id,
                                                                                  std::int64_t now, std::int64_t wait_s,
                                                                                  const ResultClaim& claim) {
    return guarded([&]() -> common::Result<std::vector<AssignmentRecord>> {
        Transaction transaction(db(), Isolation::ReadCommitted);  // as claim_returned's
        Statement query(db(), std::string("SELECT ") + kAssignmentColumns +
                                  " FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                                  "WHERE a.state = 'validated' AND a.returned_at < ? AND w.task_id = ? AND "
                                  "(a.claimed_by IS NULL OR a.claimed_until <= ? OR a.claimed_by = ?) AND NOT EXISTS "
                                  "(SELECT 1 FROM assignments b WHERE b.work_unit_id = a.work_unit_id "
                                  "AND b.id != a.id AND b.state IN ('in_progress', 'returned'))" +
                                  skip_locked(db(), "a"));
        query.bind(1, now - wait_s).bind(2, task_id).bind(3, now).bind(4, claim.holder);
        std::vector<AssignmentRecord> rows;
        while (query.step()) rows.push_back(read_assignment(query));
        for (const auto& row : rows) set_claim(db(), row.id, claim);
        transaction.commit();
        return rows;
    });
}

}  // namespace tessera::server
