// A campaign's report: the curves of its runs as one CSV, and a summary per run against the
// baselines of the same invocation (loss at equal samples vs `central` and `ddp`, virtual time to a
// target loss vs `sync`, utilisation, wasted work by cause, bytes per unit).
#pragma once

#include <filesystem>
#include <optional>
#include <ostream>
#include <vector>

#include "fleet_run.h"
#include "result.h"

namespace tessera::bench {

struct RunSummary {
    std::string name, fleet;
    std::int64_t volunteers = 0;
    bool budget_reached = false;
    std::int64_t samples = 0;      // at the budget point (the equal-samples figures)
    std::int64_t samples_run = 0;  // at the end (runs may go on towards the target)
    double final_loss = 0;         // at the budget point, on the whole validation set
    double final_accuracy = -1;
    double sample_accuracy = -1;            // the DiT's samples classified as asked; -1: not scored
    double loss_vs_central = 0;             // curve loss at the budget point / central's at the same samples
    double loss_vs_ddp = 0;                 // the same against ddp's curve
    double virtual_s = 0;                   // when the budget was reached
    std::optional<double> time_to_target;   // first virtual second at the target loss
    std::optional<double> speedup_vs_sync;  // sync's time to target / this run's
    double utilisation = 0;                 // merged volunteer time / online volunteer time
    double mean_staleness = 0;
    std::int64_t units = 0;
    double mb_down_per_unit = 0, mb_up_per_unit = 0;
    double mb_shards_per_unit = 0;   // the shards' part of mb_down_per_unit
    double patched_share = 0;        // units whose model came as patches
    double transfer_share = 0;       // transfers' share of the computed units' time
    double unhidden_share = 0;       // the transfers look-ahead did not hide, over them and training
    double state_mb_max = 0;         // the server's state directory: largest at a curve point
    double state_mb_end = 0;         // and at the last one
    std::string wasted;              // "rejected:norm_too_large=3 timed_out=2"
    std::string attacks;             // hostile results merged/returned: "noise=9/11 zero=0/13"
    std::string refusals;            // by attack ("none": honest), "none=2/300(replica_mismatch=2) noise=11/11(...)"
    double honest_refused = 0;       // honest results refused / returned
    double check_ms_per_result = 0;  // the contribution checks' time per checked result
    double loss_checked_share = 0;   // results given the loss checks / results checked
    double check_share = 0;          // checks / (checks + merges): their share of the server's compute
    double check_vs_training = 0;    // checks / the honest training they verify (same machine)
    double commitment_vs_training = 0;  // the commitments' checks alone / that training
    double audit_vs_training = 0;       // the replay audits alone (server's and twins') / that training
    double twin_vs_training = 0;        // the audit twins' training by volunteers / that training
    double loss_check_vs_training = 0;  // the loss checks alone / that training
    double check_unit_vs_training = 0;  // of them, the loss-check units' evaluations by volunteers
    double replica_vs_training = 0;     // replicas beyond each unit's first copy / that training
    // Every check: the server's, the audit twins' and the replicas' / the training they verify.
    double all_checks_vs_training = 0;
    double audited_share = 0;           // results replayed / results checked
    double unauditable_share = 0;       // results drawn for an audit that could not be replayed / checked
    double overruled_share = 0;         // results flagged, replayed and found honest / checked
    std::string overruled_flags;        // those flags by the check that raised them: "misaligned=1 …"
    // Gain per step of honest results given the proof of training (p10, median, p90) and
    // the calibration unit's: the statistics the no_improvement margin is set from.
    double gain_p10 = 0, gain_median = 0, gain_p90 = 0, calibration_gain = 0;
    GuardReport guard;  // the server's divergence guard: its evaluations and actions
};

// The first virtual second at which the curve reaches `target` (linear between points).
std::optional<double> time_to_loss(const std::vector<CurvePoint>& curve, double target);

// The curve's loss at `samples` (linear between points); none outside the curve.
std::optional<double> loss_at_samples(const std::vector<CurvePoint>& curve, std::int64_t samples);

// `target_loss` 0: the final loss of the first run named sync-*, else of central.
std::vector<RunSummary> summarize(const std::vector<RunResult>& runs, double target_loss, double& target_used);

common::Status write_curves_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs);
// Every result given the proof of training: its attack, base version, gain per step, outcome.
common::Status write_checks_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs);
// Every probed honest delta's module groups (delta_probe.h): share of the squared norm, alignment.
common::Status write_probes_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs);
// Per run and module group: the median share and alignment over its probed deltas.
void print_probes(std::ostream& out, const std::vector<RunResult>& runs);
// The DiT runs' sample quality at each guidance scale (SimSettings::judge_guidances).
common::Status write_guidance_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs,
                                  const std::vector<double>& guidances);
void print_guidance(std::ostream& out, const std::vector<RunResult>& runs, const std::vector<double>& guidances);
common::Status write_summary_csv(const std::filesystem::path& path, const std::vector<RunSummary>& rows,
                                 double target_loss);
void print_summary(std::ostream& out, const std::vector<RunSummary>& rows, double target_loss);

}  // namespace tessera::bench
