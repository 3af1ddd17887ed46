// The store's results after their upload: their lifecycle, their validation claims, and the
// figures of past results the contribution checks compare with (store_results.cpp,
// store_checks.cpp). One part of Store (store.h): a component given only this part sees only
// these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

// Why an assignment left in_progress without a result: its deadline passed or its volunteer
// gave it up.
struct EndedAssignment {
    std::string assignment_id;
    std::string work_unit_id;
    bool work_unit_retired = false;
};

// The figures of recent results the cheap checks judge a result against (one read), each
// list as its own call gives it but in no set order.
// Which accepted results' norms a check is judged against. Under a top-k codec a replicated
// unit's delta is encoded without the volunteer's carried residual (docs/protocol.md,
// "Optional encoding field"), so its norm is comparable only with other replicated units'.
enum class NormPool { All, Replicated, Single };

struct RecentFigures {
    std::vector<double> norms_per_step;  // as recent_norms_per_step
    std::vector<double> alignments;      // as recent_alignments
};

// What a validation decides on, read in one query: the result, its task, unit and volunteer,
// and the task's state around it.
struct ResultContext {
    AssignmentRecord assignment;
    TaskRecord task;
    WorkUnitRecord unit;
    std::optional<ClientRecord> client;
    std::int64_t task_volunteers = 0;   // as HistoryStore::task_volunteers(task, active_since)
    std::int64_t settings_of_task = 0;  // settings named `settings_prefix` + the task id + "/" …
    bool returned_before = false;       // as TaskStore::returned_before
};

class ResultStore : protected virtual StoreCore {
public:
    // Lifecycle transitions. Each returns false (or an empty list) when the assignment was
    // not in the state the transition starts from.
    // `claim`: the process that will validate the result (none: the first that claims it).
    // `commitments_json`: the manifest's commitments as sent ("" when it had none).
    common::Result<bool> record_return(const std::string& id, const std::string& delta_sha256, std::int64_t delta_bytes,
                                       const std::string& metrics_json, std::int64_t now, const ResultClaim& claim = {},
                                       const std::string& commitments_json = {});
    // The commitments a returned result was stored with; none when it had none.
    common::Result<std::optional<std::string>> commitments_of(const std::string& id);
    // Claims up to `limit` returned results for `claim`, oldest first: those nobody holds, those
    // whose claim lapsed by `now`, and those of the `released` holders (processes known to be
    // gone). Two processes never claim the same result (on PostgreSQL the rows are locked and
    // skipped by a concurrent claim). Returns their ids.
    common::Result<std::vector<std::string>> claim_returned(const ResultClaim& claim, std::int64_t now,
                                                            std::size_t limit,
                                                            const std::vector<std::string>& released = {});
    // Extends `claim.holder`'s claim on a returned result to `claim.until`; false when the
    // result has a verdict or another process holds it (one took it after this claim lapsed).
    common::Result<bool> renew_result_claim(const std::string& id, const ResultClaim& claim);
    // Holds a returned result (one a statistical check flagged, waiting for the moments its
    // unit started from): its metrics replaced by `metrics_json` and its claim, whoever holds
    // it, extended to `until`. False when it has a verdict.
    common::Result<bool> hold_result(const std::string& id, const std::string& metrics_json, std::int64_t until);
    // The processes that hold claims on returned results.
    common::Result<std::vector<std::string>> result_claim_holders();
    // Gives up `holder`'s claims on results still returned; returns how many.
    common::Result<std::int64_t> release_result_claims(const std::string& holder);
    common::Result<bool> mark_validated(const std::string& id, const CheckFigures& figures, std::int64_t now);
    // Accepted results are merged (`merge`) or confirm a twin that is (state confirmed).
    // Grants credit, extends the volunteer's valid streak, closes the unit when it has
    // enough accepted replicas. `concurrency`: the task's volunteers now, stored with it.
    // `a`: the result's id, volunteer and unit.
    common::Result<bool> accept(const AssignmentRecord& a, const CheckFigures& figures, double credit, bool merge,
                                std::int64_t now, std::int64_t concurrency = 1);
    // A loss-check unit's answer agreed with the server: confirmed, its credit granted, its unit
    // done; no figures (it is no delta). False when it was settled before.
    common::Result<bool> confirm_check_answer(const AssignmentRecord& a, double credit, std::int64_t now);
    // `figures`: the gain per step and alignment the checks measured before refusing (the
    // norm is not kept for refused results).
    common::Result<bool> reject(const std::string& id, const std::string& reason, const std::string& detail,
                                std::int64_t now, std::int64_t max_failures, const CheckFigures& figures = {});
    // The task's in-progress assignments past their deadline time out (on PostgreSQL those
    // another process is timing out are skipped: each times out once).
    common::Result<std::vector<EndedAssignment>> expire_overdue(const std::string& task_id, std::int64_t now,
                                                                std::int64_t max_failures);
    common::Result<std::optional<EndedAssignment>> abandon(const std::string& id, std::int64_t now,
                                                           std::int64_t max_failures);

    // What the validator and aggregator resume with after a restart.
    common::Result<std::vector<AssignmentRecord>> in_state(AssignmentState state);
    // The task's accepted, unmerged results accepted after `after_seq` (0: all of them), in
    // acceptance order: what the merge needs of each, read through the acceptance index.
    common::Result<std::vector<AcceptedResult>> accepted_after(const std::string& task_id, std::int64_t after_seq);
    // ‖Δ‖ / local steps of the most recent accepted results (units differ in length).
    common::Result<std::vector<double>> recent_norms_per_step(const std::string& task_id, int limit,
                                                              NormPool pool = NormPool::All);
    // Both of the above in one read (the norms of `pool`'s results, the alignments of all).
    common::Result<RecentFigures> recent_figures(const std::string& task_id, int limit, NormPool pool = NormPool::All);
    // The validation context of the result `id` (none when there is no such result).
    common::Result<std::optional<ResultContext>> result_context(const std::string& id, std::int64_t active_since,
                                                                const std::string& settings_prefix);
    // Gains per step of the most recent results given the proof of training, accepted or not
    // (so the margin follows the model as honest gains shrink), newest first; only those of
    // units based on `min_base_version` or later and of at least `min_full_rate_steps`.
    common::Result<std::vector<double>> recent_gains_per_step(const std::string& task_id, int limit,
                                                              std::int64_t min_base_version = 0,
                                                              double min_full_rate_steps = 0);
    // What the stall guard judges a check by (store_checks.cpp): when the task last merged a
    // result, and the refusals on `reason` since then.
    common::Result<StallFigures> stall_figures(const std::string& task_id, const std::string& reason);
    // Alignments (cosines with the consensus) of the most recent results that passed the
    // checks, newest first: what honest results show now (refused ones are left out, so that
    // refused noise cannot lower the bar).
    common::Result<std::vector<double>> recent_alignments(const std::string& task_id, int limit);
    // Results of the task accepted for merging (accepted or merged) that returned at `since` or later.
    common::Result<std::int64_t> merges_since(const std::string& task_id, std::int64_t since);
    // How many results a replicated unit needs (a tie-break raises it; a settled quorum sets it
    // to the results accepted, so the unit is done).
    common::Status set_replicas(const std::string& work_unit_id, std::int64_t replicas);
    // Makes a unit of one replica an audit twin: a second replica, for trusted volunteers only
    // (docs/operations.md, "Audit twins"), resuming the moments blob `moments_sha256` when given
    // (a kept unit's). False when it had more replicas already.
    common::Result<bool> make_audit_twin(const std::string& work_unit_id, const std::string& moments_sha256 = {},
                                         std::int64_t moments_bytes = 0);
    // Claims for `claim` the task's validated results whose twin has not come back within
    // `wait_s` and is not in progress, unless another process's claim on one is live (as
    // claim_returned: two processes never take the same result).
    common::Result<std::vector<AssignmentRecord>> claim_lonely_validated(const std::string& task_id, std::int64_t now,
                                                                         std::int64_t wait_s, const ResultClaim& claim);

protected:
    ResultStore() = default;
};

}  // namespace tessera::server
