// Validator, its replicated units: waiting for the twins, comparing them and settling the unit
// by its quorum (docs/operations.md, "Replication"), and audit twins (docs/operations.md,
// "Audit twins").
#include "validator.h"

#include <algorithm>

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "commitments_json.h"
#include "rejection_reasons.h"
#include "replay_audit.h"
#include "twin_moments.h"
#include "tensor_math.h"

namespace tessera::server {

// A replicated unit: wait for the others, compare every pair, and let the quorum decide.
common::Status Validator::settle_replicas(const AssignmentRecord& a, const TaskView& task,
                                          const CheckFigures& figures) {
    auto lock = replica_locks_.lock(a.work_unit_id);
    auto marked = store_.mark_validated(a.id, figures, clock_());
    if (!marked) return marked.error();
    auto siblings = store_.assignments_of(a.work_unit_id);
    if (!siblings) return siblings.error();
    std::vector<AssignmentRecord> validated;
    for (const auto& s : *siblings)
        if (s.state == AssignmentState::Validated) validated.push_back(s);
    if (validated.size() < 2) return {};  // the others validate later and settle the unit
    auto compared = compare_validated(a, task, validated);
    if (!compared) return compared.error();
    auto unit = store_.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    auto replicas = *unit ? (*unit)->replicas : std::int64_t{2};
    const bool audit_twin = *unit && (*unit)->trusted_only;
    auto decision = decide_quorum(validated.size(), replicas, [&](std::size_t i, std::size_t j) {
        return compared->at({i, j}).agree();
    });
    switch (decision.kind) {
        case QuorumDecision::Kind::Wait: return {};
        case QuorumDecision::Kind::Tiebreak: {
            if (auto status = store_.set_replicas(a.work_unit_id, replicas + 1); !status) return status;
            boost::json::array ids;
            for (const auto& v : validated) ids.emplace_back(v.id);
            boost::json::object event{{"wu_id", a.work_unit_id}, {"assignments", std::move(ids)}};
            return store_.add_event("replica_tiebreak", boost::json::serialize(event), clock_());
        }
        case QuorumDecision::Kind::Settle: break;
    }
    return settle_unit(a, task, figures, validated, *compared, decision, audit_twin);
}

common::Result<Validator::Comparisons> Validator::compare_validated(const AssignmentRecord& a, const TaskView& task,
                                                                    const std::vector<AssignmentRecord>& validated) {
    auto base = models_.get(a.task_id, a.base_version);
    if (!base) return base.error();
    std::vector<common::DecodedDelta> deltas;
    std::vector<std::optional<common::Commitments>> commitments;
    for (const auto& v : validated) {
        auto decoded = results_.read_decoded(v.id, value_count(**base) + 1);
        if (!decoded) return decoded.error();
        deltas.push_back(std::move(*decoded));
        auto committed = commitments_of(v.id);
        if (!committed) return committed.error();
        commitments.push_back(std::move(*committed));
    }
    Comparisons compared;
    for (std::size_t i = 0; i < deltas.size(); ++i)
        for (std::size_t j = i + 1; j < deltas.size(); ++j) {
            auto comparison = compare_replicas(deltas[i], deltas[j], task.config.replica_tolerance);
            if (!comparison) return comparison.error();
            const auto &ci = commitments[i], &cj = commitments[j];
            if (ci && cj && trajectories_comparable(*ci, *cj))
                compare_trajectories(*ci, *cj,
                                     replay_tolerance(trained_on_cpu(validated[i]) && trained_on_cpu(validated[j])),
                                     *comparison);
            compared.emplace(std::pair(i, j), *comparison);
            if (validated[i].id != a.id && validated[j].id != a.id) continue;  // reported when it was new
            if (auto status = note_compared(a, task, {validated[i].id, validated[j].id}, *comparison); !status)
                return status.error();
        }
    return compared;
}

common::Result<std::optional<common::Commitments>> Validator::commitments_of(const std::string& assignment_id) {
    auto stored = store_.commitments_of(assignment_id);
    if (!stored) return stored.error();
    if (!*stored) return std::optional<common::Commitments>();
    auto parsed = common::parse_commitments(**stored);  // checked when the result was
    if (!parsed) return std::optional<common::Commitments>();
    return std::optional<common::Commitments>(std::move(*parsed));
}

common::Status Validator::note_compared(const AssignmentRecord& a, const TaskView& task,
                                        const std::array<std::string, 2>& pair, const ReplicaComparison& comparison) {
    // The distance of every comparison, agreed or not, so the tolerance can be judged.
    boost::json::object event{{"wu_id", a.work_unit_id},
                              {"assignments", boost::json::array{pair[0], pair[1]}},
                              {"relative_l2", comparison.relative_l2},
                              {"tolerance", task.config.replica_tolerance},
                              {"allowance", comparison.allowance},
                              {"compared", comparison.by_commitments ? "commitments" : "deltas"}};
    if (comparison.by_commitments) {
        event["trajectory_tolerance"] = comparison.trajectory_tolerance;
        event["mismatch"] = comparison.trajectory_mismatch;
    }
    return store_.add_event("replicas_compared", boost::json::serialize(event), clock_());
}

common::Status Validator::settle_unit(const AssignmentRecord& a, const TaskView& task, const CheckFigures& figures,
                                      const std::vector<AssignmentRecord>& validated, const Comparisons& compared,
                                      const QuorumDecision& decision, bool audit_twin) {
    // A unit none of whose results agree is computed again, by as many as it first asked for.
    auto settled = decision.agreeing.empty() ? std::int64_t{2} : static_cast<std::int64_t>(decision.agreeing.size());
    if (auto status = store_.set_replicas(a.work_unit_id, settled); !status) return status;
    for (auto i : decision.outliers) {
        std::string distances;
        bool by_commitments = true;
        for (std::size_t j = 0; j < validated.size(); ++j) {
            if (j == i) continue;
            const auto& c = compared.at({std::min(i, j), std::max(i, j)});
            by_commitments = by_commitments && c.by_commitments;
            distances +=
                (distances.empty() ? "" : "; ") + validated[j].id + ": " +
                (c.by_commitments
                     ? c.trajectory_mismatch + " (tolerance " + std::to_string(c.trajectory_tolerance) + " relative)"
                     : std::to_string(c.relative_l2) + " (limit " + std::to_string(c.limit) + ")");
        }
        auto detail = (by_commitments ? "its committed trajectory parts from every other replica's, "
                                        "as the other replays it; against "
                                      : "relative L2 distance beyond the replica tolerance " +
                                            std::to_string(task.config.replica_tolerance) +
                                            " plus the error-feedback allowance from every other replica: ") +
                      distances;
        // An audit twin's replay is an audit's: its failure has an audit's consequences.
        const bool audit_failed = audit_twin && by_commitments;
        if (audit_failed) detail = "its audit twin, computed again by a trusted volunteer, disagrees: " + detail;
        if (auto status =
                reject(validated[i], task, audit_failed ? reason::kAuditFailed : reason::kReplicaMismatch, detail);
            !status)
            return status;
    }
    if (audit_twin)
        for (auto i : decision.agreeing)
            if (auto status = note_audit_passed(validated[i]); !status) return status;
    // One of the agreeing results is merged: the first whose volunteer is not quarantined.
    bool merged = false;
    for (auto i : decision.agreeing) {
        const auto& v = validated[i];
        auto accepted = accept(v, task, v.id == a.id ? figures : v.figures(), !merged);
        if (!accepted) return accepted.error();
        merged = merged || *accepted;
    }
    return audit_twin ? drop_twin_moments(store_, blobs_, a.work_unit_id) : common::Status();
}

common::Status Validator::accept_alone(const AssignmentRecord& a) {
    auto record = store_.task(a.task_id);
    if (!record) return record.error();
    if (!*record) return common::make_error("no task '" + a.task_id + "'");
    auto task = configs_.view(std::move(**record));
    if (!task) return task.error();
    auto lock = replica_locks_.lock(a.work_unit_id);
    auto siblings = store_.assignments_of(a.work_unit_id);
    if (!siblings) return siblings.error();
    std::vector<const AssignmentRecord*> waiting;
    for (const auto& s : *siblings)
        if (s.state == AssignmentState::Validated) waiting.push_back(&s);
    auto unit = store_.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    if (*unit && (*unit)->trusted_only) return settle_by_server(*task, waiting);
    if (waiting.size() > 1) {
        // A pair that disagreed and whose tie-break never came back: neither is merged, and
        // neither counts against its volunteer.
        for (const auto* s : waiting)
            if (auto status = reject(*s, *task, reason::kReplicaUnresolved,
                                     "the replicas disagreed and no tie-break replica came back");
                !status)
                return status;
        return {};
    }
    auto accepted = accept(a, *task, a.figures(), true);
    return accepted ? common::Status() : common::Status(accepted.error());
}

common::Result<bool> Validator::make_audit_twin(const AssignmentRecord& a,
                                                const std::optional<common::BlobRef>& moments) {
    auto made = moments ? store_.make_audit_twin(a.work_unit_id, moments->sha256, moments->bytes)
                        : store_.make_audit_twin(a.work_unit_id);
    if (!made || !*made) return made;
    boost::json::object event{{"assignment_id", a.id}, {"client_id", a.client_id}, {"wu_id", a.work_unit_id}};
    if (moments) event["moments"] = moments->sha256;
    if (auto status = store_.add_event("audit_twin", boost::json::serialize(event), clock_()); !status)
        return status.error();
    return true;
}

common::Status Validator::settle_by_server(const TaskView& task, const std::vector<const AssignmentRecord*>& waiting) {
    // The server keeps the final say: it replays each result itself, refuses those that
    // disagree and merges the first that agrees. Its replay is the audit: the unit is done once
    // one is accepted (no late twin is given out).
    if (waiting.empty()) return {};
    if (auto status = store_.set_replicas(waiting.front()->work_unit_id, 1); !status) return status;
    bool merged = false;
    for (const auto* a : waiting) {
        auto sent = sent_work_unit(*a);
        if (!sent) return sent.error();
        auto commitments = commitments_of(a->id);
        if (!commitments) return commitments.error();
        auto verdict = checks_.audit_alone(*a, task, *sent, std::move(*commitments));
        if (!verdict) return verdict.error();
        if (!verdict->reason.empty()) {
            auto detail =
                "no trusted volunteer settled its audit twin in time; the server replayed it: " + verdict->detail;
            if (auto status = reject(*a, task, verdict->reason, detail); !status) return status;
            continue;
        }
        if (verdict->audited)
            if (auto status = note_audit_passed(*a); !status) return status;
        auto accepted = accept(*a, task, a->figures(), !merged);
        if (!accepted) return accepted.error();
        merged = merged || *accepted;
    }
    return drop_twin_moments(store_, blobs_, waiting.front()->work_unit_id);
}

}  // namespace tessera::server
