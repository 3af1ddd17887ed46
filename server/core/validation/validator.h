// The validator: takes a stored result (state returned) through the content checks
// (result_checks.h) — every result of a new or quarantined volunteer gets the loss checks, a
// trusted volunteer's at the task's rate — then through the replica comparison, and accepts
// it (handing it to the aggregator) or rejects it with a reason. It keeps each volunteer's
// standing: R refusals within the window quarantine it (its valid results are then kept but
// neither merged nor credited), a new streak of valid results lifts the quarantine. Its stall
// guard keeps any check from stalling a task (stall_guard.h), and when nothing has been merged
// for a while a quarantined volunteer's results that pass every check are merged (the
// quarantine fallback: quarantine never takes every volunteer out of a task).
// Thread-safe: checks of different results run concurrently on the work pool.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "clock.h"
#include "doorbell.h"
#include "keyed_mutex.h"
#include "replica_comparison.h"
#include "replica_quorum.h"
#include "result_checks.h"
#include "stall_guard.h"
#include "store.h"
#include "task_lookup.h"

namespace tessera::server {

// A result's volunteer, unit and task concurrency as a caller has read them already (null:
// read when needed). A validation reads them once, when it starts, and decides on them throughout.
struct ResultReadings {
    const ClientRecord* client = nullptr;
    const WorkUnitRecord* unit = nullptr;
    std::optional<std::int64_t> concurrency;
};

class Validator {
public:
    Validator(Store& store, ResultFiles& results, ModelCache& models, ProbePools& probes, BlobStore& blobs,
              CopyDetector& copies, CheckCosts& costs, Clock clock, Doorbell& accepted, std::uint64_t seed);

    // Runs the checks now, on the calling thread (the validation stage calls it for the results
    // this process claimed: validation_stage.h).
    common::Status validate(const std::string& assignment_id) { return validate(assignment_id, nullptr); }
    // Accepts a validated result whose replica never came back (it is merged alone; an audit
    // twin's is replayed by the server first).
    common::Status accept_alone(const AssignmentRecord& assignment);
    // True with `chance` (the validator's seeded draws): the loss checks here, replay audits at
    // the intake.
    bool draw(double chance);
    // 1 credit = 1000 training samples of an accepted result.
    static double credit_for(const TaskConfig& config, std::int64_t local_steps);
    // A loss-check unit's answer earns a training sample's credit for about this many forward
    // passes (a training step's forward, backward and update cost about three).
    static constexpr double kForwardPassesPerSample = 3;
    // How long a result drawn for a loss-check unit waits for its answer (that unit's deadline is
    // no longer: scheduler_checks.cpp); then the server checks it itself.
    static constexpr std::int64_t kCheckWaitS = 600;

private:
    // `answered`: a loss-check unit's report on this result, checked already (validator_checks.cpp).
    common::Status validate(const std::string& assignment_id, const common::LossReport* answered);
    // Loss-check units (validator_checks.cpp). Whether the task's loss checks go to volunteers
    // (not with catch-up patches: a unit's base may be its volunteer's own reconstruction).
    static bool checks_by_volunteers(const TaskConfig& config);
    // A result held for a loss-check unit's answer that has not come, within the wait: held
    // again (true). Once the wait is over, or the unit retired, `by_server` says the server
    // checks it itself.
    common::Result<bool> waits_for_check(const AssignmentRecord& assignment, bool answered, bool& by_server);
    // The result's loss-check unit made (its file and the task's held-out shard as blobs) and
    // the result held for its answer.
    common::Status ask_for_check(const AssignmentRecord& assignment, const TaskView& task, const WorkUnitRecord& unit);
    // A loss-check unit's answer: checked on a sample of its rows, then confirmed with credit
    // and the held result validated with it, or refused `check_mismatch` (as a failed audit)
    // and the result checked by the server.
    common::Status settle_check_answer(const AssignmentRecord& answer, const TaskView& task,
                                       const WorkUnitRecord& unit);
    // The task's held-out shard as a blob (put once per dataset).
    common::Result<common::BlobRef> held_out_blob(const TaskConfig& config);
    // Replicas i < j of a unit compared, by their indices among its validated results.
    using Comparisons = std::map<std::pair<std::size_t, std::size_t>, ReplicaComparison>;

    common::Status settle_replicas(const AssignmentRecord& assignment, const TaskView& task,
                                   const CheckFigures& figures);
    // Every pair compared; the new result's comparisons reported as events.
    common::Result<Comparisons> compare_validated(const AssignmentRecord& assignment, const TaskView& task,
                                                  const std::vector<AssignmentRecord>& validated);
    // A replica's commitments as stored (none when it sent none, or they do not parse).
    common::Result<std::optional<common::Commitments>> commitments_of(const std::string& assignment_id);
    // The `replicas_compared` event of one pair: the delta distance, and the trajectories'
    // verdict when they were compared.
    common::Status note_compared(const AssignmentRecord& assignment, const TaskView& task,
                                 const std::array<std::string, 2>& pair, const ReplicaComparison& comparison);
    // Outliers refused, the agreeing accepted and the first of them merged.
    common::Status settle_unit(const AssignmentRecord& assignment, const TaskView& task, const CheckFigures& figures,
                               const std::vector<AssignmentRecord>& validated, const Comparisons& compared,
                               const QuorumDecision& decision, bool audit_twin);
    // Makes the result's unit an audit twin (docs/operations.md, "Audit twins"), resuming
    // `moments` when given (a kept unit's); false when its unit was replicated already (the
    // replica comparison is its audit).
    common::Result<bool> make_audit_twin(const AssignmentRecord& assignment,
                                         const std::optional<common::BlobRef>& moments = std::nullopt);
    // A result held for the moments its flag needed, replayed and passed: the flag counts as
    // overruled, and the gain its loss checks measured is kept with its figures (replay_audit.h,
    // HeldFlag).
    static void carry_held_flag(const AssignmentRecord& assignment, Verdict& verdict);
    // The audit twin of a result drawn for one (`from_moments`: a kept unit's, from the moments
    // its volunteer sent); true when made. Moments not those its commitments name refuse the
    // result `audit_failed` instead (`refused`).
    common::Result<bool> twin_drawn(const AssignmentRecord& assignment, const TaskView& task, bool from_moments,
                                    bool& refused);
    // An audit twin's results that no trusted volunteer settled in time, judged by the server's
    // own replay: those that disagree refused, the first that agrees merged.
    common::Status settle_by_server(const TaskView& task, const std::vector<const AssignmentRecord*>& waiting);
    // Accepts; merged (and credited) unless `merge` is false or the volunteer is quarantined.
    // Returns whether it is merged.
    common::Result<bool> accept(const AssignmentRecord& assignment, const TaskView& task, const CheckFigures& figures,
                                bool merge, ResultReadings known = {});
    common::Status reject(const AssignmentRecord& assignment, const TaskView& task, std::string_view reason,
                          const std::string& detail, const CheckFigures& figures = {});
    // A result that passed the checks: an audit twin made, its replicas compared, or accepted.
    // With what its upload drew for an audit (audit_asked) and the task's concurrency.
    common::Status settle_passed(const AssignmentRecord& assignment, const TaskView& task, const ResultContext& context,
                                 Verdict& verdict, std::pair<std::string, std::int64_t> asked_and_concurrency);
    // The events a passed result's verdict calls for: its audit passed, flagged, checks waived.
    common::Status note_passed(const AssignmentRecord& assignment, const Verdict& verdict);
    // A result whose moments were asked for and have not come, within the wait: held until
    // the wait ends (again, after a restart released its claim). True when it waits.
    common::Result<bool> waits_for_moments(const AssignmentRecord& assignment, const std::string& asked);
    // Holds a result a statistical check flagged until its volunteer sends the kept moments
    // its unit resumed (docs/operations.md, "Flags settled by replays"): its replay decides.
    common::Status ask_for_moments(const AssignmentRecord& assignment, const Verdict& verdict);
    // Which checks beyond the cheap ones the result gets (result_checks.h).
    CheckPlan plan_checks(const AssignmentRecord& assignment, const TaskConfig& config, const ResultContext& context);
    // `overruled`: the statistical flag the replay overruled, if it was for one.
    common::Status note_audit_passed(const AssignmentRecord& assignment, const std::string& overruled = {});
    common::Status note_flagged(const AssignmentRecord& assignment, const Verdict& verdict);
    // Why the result is too stale to merge under the task's staleness function (its age in
    // versions now, against R × the concurrency), or "" when it is not.
    static std::string too_stale(const AssignmentRecord& assignment, const TaskView& task, std::int64_t concurrency);
    common::Status note_waived(const AssignmentRecord& assignment, const Verdict& verdict);

    Store& store_;
    ResultFiles& results_;
    ModelCache& models_;
    BlobStore& blobs_;  // where a twin's moments are published
    CopyDetector& copies_;
    ResultChecks checks_;
    Clock clock_;
    StallGuard guard_;
    Doorbell& accepted_;               // rung for each result accepted for merging (aggregator_election.h reads them)
    TaskConfigCache configs_;
    KeyedMutex replica_locks_;         // a replicated unit is settled by one thread at a time
    std::mutex mutex_;                 // guards rng_ and held_out_blobs_
    std::mt19937_64 rng_;
    std::map<std::string, common::BlobRef> held_out_blobs_;  // by dataset directory
};

}  // namespace tessera::server
