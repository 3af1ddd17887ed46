// What one run of a fleet campaign measured: its validation curve against virtual time and
// samples, and where every issued unit (and every volunteer-second) went. Plain data.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "delta_probe.h"
#include "prompt_fidelity.h"

namespace tessera::bench {

struct CurvePoint {
    double virtual_s = 0;
    std::int64_t samples = 0;  // training samples merged into the model (central: trained)
    std::int64_t version = 0;
    double loss = 0;        // validation loss
    double accuracy = -1;   // classifiers; -1 otherwise
    double staleness = 0;   // mean τ of the results merged since the previous point
    std::int64_t busy = 0;  // volunteers computing a unit at this moment
    std::uint64_t state_bytes = 0;  // the server's state directory (central: 0)
};

// Where an issued unit ended ("merged", "replica", "buffered", "rejected:<reason>",
// "left_mid_unit:timed_out", "timed_out", "in_flight_at_end", ...), with the volunteer time it took.
struct UnitOutcomes {
    std::map<std::string, std::int64_t> count;
    std::map<std::string, double> seconds;
};

struct AttackOutcome {
    std::int64_t returned = 0;
    std::int64_t merged = 0;
    std::map<std::string, std::int64_t> refused;  // by rejection reason
};

// The server's compute over a run: the contribution checks and the merges.
struct ServerCost {
    double check_s = 0;
    double commitment_s = 0;  // of check_s, the commitments' checks (identity, opening loss)
    double audit_s = 0;       // of check_s, the replay audits
    double loss_check_s = 0;  // of check_s, the loss checks (held-out data and the unit's own samples)
    std::int64_t audited = 0;      // results replayed
    std::int64_t unauditable = 0;  // drawn for an audit that could not replay them
    std::int64_t flags_overruled = 0;  // of those replayed, flagged by a statistical check and agreeing
    std::map<std::string, std::int64_t> overruled_by_reason;  // those flags by the check that raised them
    double merge_s = 0;
    std::int64_t checked = 0;       // results checked
    std::int64_t loss_checked = 0;  // of those, given the loss checks
    double training_s = 0;          // the simulated volunteers' training on this machine, for comparison
    double audit_twin_s = 0;        // of their training, the audit twins' (a check, not in training_s)
    double replica_s = 0;           // and the replicas' beyond each unit's first copy (a check, not in training_s)
    double check_unit_s = 0;        // their loss-check units' evaluations (a check, not in training_s)
    double calibration_gain = 0;    // the task's calibration unit's gain per step
};

// The server's divergence guard over a run (divergence_guard.h): the evaluations it was given
// (the task's eval_samples, at most one per eval_interval_s of virtual time, as the server's
// loss curve) and what it did.
struct GuardReport {
    std::int64_t evaluations = 0;
    double highest_ratio = 0;          // the highest finite loss over the best one before it
    std::vector<std::string> actions;  // the divergence events' messages, in order
    bool paused = false;               // it paused the task, which ended the run
};

// A result the validator judged (checks.csv): who sent it and what it showed.
struct CheckedResult {
    std::string assignment;
    std::string attack;  // "none": an honest volunteer
    std::int64_t base_version = 0;
    std::int64_t local_steps = 0;
    std::optional<double> gain_per_step;  // absent: refused before the proof of training
    std::optional<double> alignment;      // absent: no consensus to compare with (or refused before)
    std::string outcome;                  // as in UnitOutcomes
    std::int64_t returned_at = 0;         // virtual seconds
    std::string detail;                   // a refusal's message (it states the margin), else empty
    std::string volunteer;                // its volunteer's client id
    std::string audit;                    // what was drawn at its upload: replay, moments, twin, or ""
    std::string audited;                  // its audit (a replay or a twin): passed, overruled (a flag's), failed, or ""
};

struct RunResult {
    std::string name;  // "central", "sync-fedavg", "fedasync", ...
    std::string fleet;
    std::int64_t volunteers = 0;
    std::vector<CurvePoint> curve;  // on the curve's validation sample (SimSettings::eval_samples)
    std::size_t budget_point = 0;   // the curve point where the samples budget was reached (or the last)
    double final_loss = 0;          // the model at the budget point, on the whole validation set
    double final_accuracy = -1;
    double sample_accuracy = -1;  // the DiT's samples classified as asked (SampleJudge); -1: not scored
    std::vector<double> sample_accuracy_by_guidance;  // at each SimSettings::judge_guidances scale
    std::vector<PromptFidelity> fidelity_by_guidance;  // captioned canvases (CaptionJudge): at each scale
    bool budget_reached = false;
    std::int64_t units_issued = 0;
    std::int64_t reissued_after_timeout = 0;  // timed-out assignments whose unit went to another
    UnitOutcomes outcomes;
    double online_s = 0;                // volunteer-seconds online
    double bytes_down = 0;              // over all units: model versions and shards
    double bytes_down_shards = 0;       // the shards' part of it
    std::int64_t units_on_patches = 0;  // units whose model came as patches from the one held
    double bytes_up = 0;
    double transfer_s = 0;                         // volunteer-seconds of the units computed spent on transfers
    double unit_s = 0;                             // and in all (transfers and training)
    // Volunteer-seconds between the end of one unit's training and the start of the next (or,
    // idle before, from asking to training): the transfers not hidden by look-ahead.
    double unhidden_s = 0;
    double trained_s = 0;                          // and spent training
    std::map<std::string, AttackOutcome> attacks;  // by attack name ("none": honest volunteers)
    ServerCost server_cost;
    GuardReport guard;
    std::vector<CheckedResult> checked;  // in the order they were returned
    std::vector<ProbedDelta> probes;     // with SimSettings::probe_deltas, in the order they were trained
    // The model at the budget point, which the experts' comparison samples (expert_runs.h).
    std::shared_ptr<const common::NamedTensors> budget_weights;
};

}  // namespace tessera::bench
