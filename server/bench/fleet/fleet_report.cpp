// Summaries, CSV files and the printed table of a fleet campaign.
#include "fleet_report.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "fleet_spec.h"

namespace tessera::bench {
namespace {

const RunResult* find_run(const std::vector<RunResult>& runs, std::string_view prefix) {
    for (const auto& run : runs)
        if (run.name.rfind(prefix, 0) == 0) return &run;
    return nullptr;
}

// The run's curve loss at its budget point over the baseline's at the same samples; 0 when
// there is no baseline or it does not reach that far.
double loss_ratio(const RunResult& run, const RunResult* baseline) {
    if (baseline == nullptr || run.curve.empty()) return 0;
    const auto& at_budget = run.curve.at(run.budget_point);
    auto reference = loss_at_samples(baseline->curve, at_budget.samples);
    return reference && *reference > 0 ? at_budget.loss / *reference : 0;
}

std::string format(const char* pattern, double value) {
    char text[64];
    std::snprintf(text, sizeof text, pattern, value);
    return text;
}

std::string optional_seconds(const std::optional<double>& value) { return value ? format("%.0f", *value) : "-"; }

}  // namespace

std::optional<double> time_to_loss(const std::vector<CurvePoint>& curve, double target) {
    for (std::size_t i = 0; i < curve.size(); ++i) {
        if (curve[i].loss > target) continue;
        if (i == 0) return curve[0].virtual_s;
        const auto& a = curve[i - 1];
        const auto& b = curve[i];
        double share = a.loss > b.loss ? (a.loss - target) / (a.loss - b.loss) : 1.0;
        return a.virtual_s + share * (b.virtual_s - a.virtual_s);
    }
    return std::nullopt;
}

std::optional<double> loss_at_samples(const std::vector<CurvePoint>& curve, std::int64_t samples) {
    for (std::size_t i = 1; i < curve.size(); ++i) {
        const auto& a = curve[i - 1];
        const auto& b = curve[i];
        if (samples < a.samples || samples > b.samples) continue;
        double share = b.samples > a.samples ? double(samples - a.samples) / double(b.samples - a.samples) : 0.0;
        return a.loss + share * (b.loss - a.loss);
    }
    return std::nullopt;
}

namespace {

// The run's size figures: samples at the budget, staleness weighted by samples, transfers and
// the state directory.
void fill_volume(RunSummary& row, const RunResult& run) {
    if (!run.curve.empty()) {
        const auto& at_budget = run.curve.at(run.budget_point);
        row.samples = at_budget.samples;
        row.virtual_s = at_budget.virtual_s;
        row.samples_run = run.curve.back().samples;
    }
    double staleness = 0, weight = 0;
    for (std::size_t i = 1; i < run.curve.size(); ++i) {
        double n = static_cast<double>(run.curve[i].samples - run.curve[i - 1].samples);
        staleness += run.curve[i].staleness * n;
        weight += n;
    }
    row.mean_staleness = weight > 0 ? staleness / weight : 0;
    if (run.units_issued > 0) {
        row.mb_down_per_unit = run.bytes_down / 1e6 / static_cast<double>(run.units_issued);
        row.mb_up_per_unit = run.bytes_up / 1e6 / static_cast<double>(run.units_issued);
        row.mb_shards_per_unit = run.bytes_down_shards / 1e6 / static_cast<double>(run.units_issued);
        row.patched_share = static_cast<double>(run.units_on_patches) / static_cast<double>(run.units_issued);
    }
    if (run.unit_s > 0) row.transfer_share = run.transfer_s / run.unit_s;
    if (run.unhidden_s + run.trained_s > 0) row.unhidden_share = run.unhidden_s / (run.unhidden_s + run.trained_s);
    for (const auto& p : run.curve)
        row.state_mb_max = std::max(row.state_mb_max, static_cast<double>(p.state_bytes) / 1e6);
    if (!run.curve.empty()) row.state_mb_end = static_cast<double>(run.curve.back().state_bytes) / 1e6;
    row.guard = run.guard;
}

// What was not merged, and what became of each attack's results: "noise=9/11", with reasons.
void fill_outcomes(RunSummary& row, const RunResult& run) {
    std::ostringstream wasted;
    for (const auto& [outcome, count] : run.outcomes.count)
        if (outcome != "merged") wasted << (wasted.tellp() > 0 ? " " : "") << outcome << "=" << count;
    row.wasted = wasted.str();
    std::ostringstream attacks;
    for (const auto& [attack, outcome] : run.attacks)
        if (attack != "none" && attack != kCoverUnit && attack != kLossCheckLabel)
            attacks << (attacks.tellp() > 0 ? " " : "") << attack << "=" << outcome.merged << "/" << outcome.returned;
    row.attacks = attacks.str();
    std::ostringstream refusals;
    for (const auto& [attack, outcome] : run.attacks) {
        std::int64_t refused = 0;
        std::ostringstream reasons;
        for (const auto& [reason, count] : outcome.refused) {
            refused += count;
            reasons << (reasons.tellp() > 0 ? " " : "") << reason << "=" << count;
        }
        refusals << (refusals.tellp() > 0 ? " " : "") << attack << "=" << refused << "/" << outcome.returned
                 << (refused > 0 ? "(" + reasons.str() + ")" : "");
        if (attack == "none" && outcome.returned > 0)
            row.honest_refused = static_cast<double>(refused) / static_cast<double>(outcome.returned);
    }
    row.refusals = refusals.str();
}

// The contribution checks' cost and the honest gains per step they judge by.
void fill_check_costs(RunSummary& row, const RunResult& run) {
    const auto& cost = run.server_cost;
    if (cost.checked > 0) {
        row.check_ms_per_result = 1000 * cost.check_s / static_cast<double>(cost.checked);
        row.loss_checked_share = static_cast<double>(cost.loss_checked) / static_cast<double>(cost.checked);
        row.audited_share = static_cast<double>(cost.audited) / static_cast<double>(cost.checked);
        row.unauditable_share = static_cast<double>(cost.unauditable) / static_cast<double>(cost.checked);
        row.overruled_share = static_cast<double>(cost.flags_overruled) / static_cast<double>(cost.checked);
    }
    for (const auto& [reason, count] : cost.overruled_by_reason)
        row.overruled_flags += (row.overruled_flags.empty() ? "" : " ") + reason + "=" + std::to_string(count);
    if (cost.check_s + cost.merge_s > 0) row.check_share = cost.check_s / (cost.check_s + cost.merge_s);
    // Audit twins and loss-check units are checks computed by volunteers: counted with the server's.
    const double by_volunteers = cost.audit_twin_s + cost.check_unit_s;
    if (cost.training_s > 0) row.check_vs_training = (cost.check_s + by_volunteers) / cost.training_s;
    if (cost.training_s > 0) row.commitment_vs_training = cost.commitment_s / cost.training_s;
    if (cost.training_s > 0) row.audit_vs_training = (cost.audit_s + cost.audit_twin_s) / cost.training_s;
    if (cost.training_s > 0) row.twin_vs_training = cost.audit_twin_s / cost.training_s;
    if (cost.training_s > 0) row.loss_check_vs_training = (cost.loss_check_s + cost.check_unit_s) / cost.training_s;
    if (cost.training_s > 0) row.check_unit_vs_training = cost.check_unit_s / cost.training_s;
    if (cost.training_s > 0) row.replica_vs_training = cost.replica_s / cost.training_s;
    if (cost.training_s > 0)
        row.all_checks_vs_training = (cost.check_s + by_volunteers + cost.replica_s) / cost.training_s;
    std::vector<double> gains;
    for (const auto& c : run.checked)
        if (c.attack == "none" && c.gain_per_step) gains.push_back(*c.gain_per_step);
    if (!gains.empty()) {
        std::sort(gains.begin(), gains.end());
        auto at = [&](double q) { return gains[static_cast<std::size_t>(q * static_cast<double>(gains.size() - 1))]; };
        row.gain_p10 = at(0.1);
        row.gain_median = at(0.5);
        row.gain_p90 = at(0.9);
    }
    row.calibration_gain = cost.calibration_gain;
}

}  // namespace

std::vector<RunSummary> summarize(const std::vector<RunResult>& runs, double target_loss, double& target_used) {
    const auto* central = find_run(runs, "central");
    const auto* ddp = find_run(runs, "ddp");
    const auto* sync = find_run(runs, "sync-");
    target_used = target_loss;
    // The target is read off the curves (one validation sample for all runs), not the final figures.
    if (target_used <= 0 && sync && !sync->curve.empty()) target_used = sync->curve.at(sync->budget_point).loss;
    if (target_used <= 0 && central && !central->curve.empty())
        target_used = central->curve.at(central->budget_point).loss;
    std::optional<double> sync_time = sync ? time_to_loss(sync->curve, target_used) : std::nullopt;

    std::vector<RunSummary> rows;
    for (const auto& run : runs) {
        RunSummary row;
        row.name = run.name;
        row.fleet = run.fleet;
        row.volunteers = run.volunteers;
        row.budget_reached = run.budget_reached;
        row.units = run.units_issued;
        row.final_loss = run.final_loss;
        row.final_accuracy = run.final_accuracy;
        row.sample_accuracy = run.sample_accuracy;
        // Paired on the curves' validation sample, at this run's own sample count.
        row.loss_vs_central = loss_ratio(run, central);
        row.loss_vs_ddp = loss_ratio(run, ddp);
        row.time_to_target = time_to_loss(run.curve, target_used);
        if (sync_time && row.time_to_target && *row.time_to_target > 0)
            row.speedup_vs_sync = *sync_time / *row.time_to_target;
        auto merged = run.outcomes.seconds.find("merged");
        if (run.online_s > 0 && merged != run.outcomes.seconds.end()) row.utilisation = merged->second / run.online_s;
        fill_volume(row, run);
        fill_outcomes(row, run);
        fill_check_costs(row, run);
        rows.push_back(std::move(row));
    }
    return rows;
}

common::Status write_curves_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs) {
    std::ofstream out(path);
    out << "run,fleet,volunteers,virtual_s,samples,version,val_loss,val_accuracy,staleness,busy,state_mb\n";
    for (const auto& run : runs)
        for (const auto& p : run.curve)
            out << run.name << "," << run.fleet << "," << run.volunteers << "," << format("%.3f", p.virtual_s) << ","
                << p.samples << "," << p.version << "," << format("%.6f", p.loss) << ","
                << (p.accuracy >= 0 ? format("%.4f", p.accuracy) : "") << "," << format("%.3f", p.staleness) << ","
                << p.busy << "," << format("%.3f", static_cast<double>(p.state_bytes) / 1e6) << "\n";
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

common::Status write_checks_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs) {
    std::ofstream out(path);
    out << "run,assignment,attack,returned_s,base_version,local_steps,gain_per_step,alignment,outcome,detail,"
           "volunteer,audit,audited\n";
    for (const auto& run : runs)
        for (const auto& c : run.checked) {
            auto detail = c.detail;
            std::replace(detail.begin(), detail.end(), '"', '\'');
            out << run.name << "," << c.assignment << "," << c.attack << "," << c.returned_at << "," << c.base_version
                << "," << c.local_steps << "," << (c.gain_per_step ? format("%.7f", *c.gain_per_step) : "") << ","
                << (c.alignment ? format("%.4f", *c.alignment) : "") << "," << c.outcome << ",\"" << detail << "\","
                << c.volunteer << "," << c.audit << "," << c.audited << "\n";
        }
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

common::Status write_probes_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs) {
    std::ofstream out(path);
    out << "run,delta,base_version,local_steps,group,share,alignment\n";
    for (const auto& run : runs)
        for (std::size_t i = 0; i < run.probes.size(); ++i)
            for (const auto& m : run.probes[i].modules)
                out << run.name << "," << i << "," << run.probes[i].base_version << "," << run.probes[i].local_steps
                    << "," << m.group << "," << format("%.6f", m.share) << ","
                    << (m.alignment ? format("%.4f", *m.alignment) : "") << "\n";
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

void print_probes(std::ostream& out, const std::vector<RunResult>& runs) {
    for (const auto& run : runs) {
        if (run.probes.empty()) continue;
        out << "modules of " << run.name << "'s " << run.probes.size()
            << " honest deltas (median share of the squared norm, median cosine with the recent deltas' sum):\n";
        for (const auto& g : summarize_probes(run.probes))
            out << "    " << g.group << std::string(g.group.size() < 22 ? 22 - g.group.size() : 1, ' ')
                << format("%8.4f", g.median_share) << "  "
                << (g.median_alignment ? format("%7.3f", *g.median_alignment) : "      -") << "\n";
    }
}

common::Status write_guidance_csv(const std::filesystem::path& path, const std::vector<RunResult>& runs,
                                  const std::vector<double>& guidances) {
    std::ofstream out(path);
    out << "run,guidance,sample_accuracy\n";
    for (const auto& run : runs)
        for (std::size_t i = 0; i < run.sample_accuracy_by_guidance.size() && i < guidances.size(); ++i)
            out << run.name << "," << guidances[i] << "," << format("%.4f", run.sample_accuracy_by_guidance[i]) << "\n";
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

void print_guidance(std::ostream& out, const std::vector<RunResult>& runs, const std::vector<double>& guidances) {
    out << "cas by guidance scale:";
    for (double g : guidances) out << format("  %5.1f", g);
    out << "\n";
    for (const auto& run : runs) {
        if (run.sample_accuracy_by_guidance.empty()) continue;
        out << "    " << run.name << std::string(run.name.size() < 17 ? 17 - run.name.size() : 1, ' ');
        for (double share : run.sample_accuracy_by_guidance) out << format("  %5.3f", share);
        out << "\n";
    }
}

common::Status write_summary_csv(const std::filesystem::path& path, const std::vector<RunSummary>& rows,
                                 double target_loss) {
    std::ofstream out(path);
    out << "run,fleet,volunteers,budget_reached,samples,samples_run,final_loss,final_accuracy,loss_vs_central,virtual_"
           "s,"
           "target_loss,time_to_target,speedup_vs_sync,utilisation,mean_staleness,units,mb_down_per_unit,"
           "mb_up_per_unit,wasted,attacks_merged_of_returned,sample_accuracy,refused_of_returned,honest_refused,"
           "check_ms_per_result,loss_checked_share,check_share,check_vs_training,gain_p10,gain_median,gain_p90,"
           "calibration_gain,mb_shards_per_unit,transfer_share,patched_share,state_mb_max,state_mb_end,loss_vs_ddp,"
           "unhidden_share,commitment_vs_training,audit_vs_training,audited_share,unauditable_share,twin_vs_training,"
           "loss_check_vs_training,replica_vs_training,all_checks_vs_training,overruled_share,check_unit_vs_training\n";
    for (const auto& r : rows)
        out << r.name << "," << r.fleet << "," << r.volunteers << "," << (r.budget_reached ? 1 : 0) << "," << r.samples
            << "," << r.samples_run << "," << format("%.6f", r.final_loss) << ","
            << (r.final_accuracy >= 0 ? format("%.4f", r.final_accuracy) : "") << ","
            << format("%.4f", r.loss_vs_central) << "," << format("%.1f", r.virtual_s) << ","
            << format("%.6f", target_loss) << "," << (r.time_to_target ? format("%.1f", *r.time_to_target) : "") << ","
            << (r.speedup_vs_sync ? format("%.3f", *r.speedup_vs_sync) : "") << "," << format("%.4f", r.utilisation)
            << "," << format("%.2f", r.mean_staleness) << "," << r.units << "," << format("%.4f", r.mb_down_per_unit)
            << "," << format("%.4f", r.mb_up_per_unit) << ",\"" << r.wasted << "\",\"" << r.attacks << "\","
            << (r.sample_accuracy >= 0 ? format("%.4f", r.sample_accuracy) : "") << ",\"" << r.refusals << "\","
            << format("%.4f", r.honest_refused) << "," << format("%.2f", r.check_ms_per_result) << ","
            << format("%.3f", r.loss_checked_share) << "," << format("%.4f", r.check_share) << ","
            << format("%.4f", r.check_vs_training) << "," << format("%.6f", r.gain_p10) << ","
            << format("%.6f", r.gain_median) << "," << format("%.6f", r.gain_p90) << ","
            << format("%.6f", r.calibration_gain) << "," << format("%.4f", r.mb_shards_per_unit) << ","
            << format("%.4f", r.transfer_share) << "," << format("%.4f", r.patched_share) << ","
            << format("%.3f", r.state_mb_max) << "," << format("%.3f", r.state_mb_end) << ","
            << format("%.4f", r.loss_vs_ddp) << "," << format("%.4f", r.unhidden_share) << ","
            << format("%.4f", r.commitment_vs_training) << "," << format("%.4f", r.audit_vs_training) << ","
            << format("%.4f", r.audited_share) << "," << format("%.4f", r.unauditable_share) << ","
            << format("%.4f", r.twin_vs_training) << "," << format("%.4f", r.loss_check_vs_training) << ","
            << format("%.4f", r.replica_vs_training) << "," << format("%.4f", r.all_checks_vs_training) << ","
            << format("%.4f", r.overruled_share) << "," << format("%.4f", r.check_unit_vs_training) << "\n";
    out.close();
    if (!out) return common::make_error("cannot write " + path.string());
    return {};
}

void print_summary(std::ostream& out, const std::vector<RunSummary>& rows, double target_loss) {
    out << "target loss " << format("%.4f", target_loss) << " (time to target: first virtual second at or below it)\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-14s %-8s %4s %9s %8s %7s %6s %8s %7s %9s %7s %6s %6s %5s %8s %8s  %s\n", "run",
                  "fleet", "K", "samples", "loss", "acc", "cas", "vs-cent", "vs-ddp", "t-target", "vs-sync", "util",
                  "stale", "units", "MB-down", "MB-up", "other outcomes");
    out << line;
    for (const auto& r : rows) {
        std::snprintf(
            line, sizeof line,
            "%-14s %-8s %4lld %9lld %8.4f %7s %6s %8s %7s %9s %7s %6.2f %6.1f %5lld %8.3f %8.3f  %s%s\n",
            r.name.c_str(), r.fleet.c_str(), static_cast<long long>(r.volunteers), static_cast<long long>(r.samples),
            r.final_loss, r.final_accuracy >= 0 ? format("%.4f", r.final_accuracy).c_str() : "-",
            r.sample_accuracy >= 0 ? format("%.3f", r.sample_accuracy).c_str() : "-",
            r.loss_vs_central > 0 ? format("%.3f", r.loss_vs_central).c_str() : "-",
            r.loss_vs_ddp > 0 ? format("%.3f", r.loss_vs_ddp).c_str() : "-", optional_seconds(r.time_to_target).c_str(),
            r.speedup_vs_sync ? format("%.2f", *r.speedup_vs_sync).c_str() : "-", r.utilisation, r.mean_staleness,
            static_cast<long long>(r.units), r.mb_down_per_unit, r.mb_up_per_unit,
            r.budget_reached ? "" : "[budget not reached] ", r.wasted.c_str());
        out << line;
        out << "    transfers: " << format("%.3f", r.mb_down_per_unit - r.mb_shards_per_unit) << " MB model + "
            << format("%.3f", r.mb_shards_per_unit) << " MB shards down, " << format("%.3f", r.mb_up_per_unit)
            << " MB up per unit; " << format("%.1f", 100 * r.transfer_share) << " % of the units' time, "
            << format("%.1f", 100 * r.unhidden_share) << " % not hidden; " << format("%.0f", 100 * r.patched_share)
            << " % of the units' models came as patches\n";
        if (r.state_mb_max > 0)
            out << "    server state directory: " << format("%.1f", r.state_mb_end) << " MB at the end, at most "
                << format("%.1f", r.state_mb_max) << " MB at a curve point\n";
        if (!r.attacks.empty()) out << "    hostile results merged/returned: " << r.attacks << "\n";
        if (!r.refusals.empty()) out << "    refused/returned by attack: " << r.refusals << "\n";
        if (r.check_ms_per_result > 0)
            out << "    checks: " << format("%.1f", r.check_ms_per_result) << " ms per result, "
                << format("%.0f", 100 * r.loss_checked_share) << " % given the loss checks, "
                << format("%.1f", 100 * r.check_share) << " % of the server's checks + merges, "
                << format("%.1f", 100 * r.check_vs_training) << " % of the training time they verify (commitments "
                << format("%.1f", 100 * r.commitment_vs_training) << " %, loss checks "
                << format("%.1f", 100 * r.loss_check_vs_training) << " % (by volunteers "
                << format("%.1f", 100 * r.check_unit_vs_training) << " %), replay audits "
                << format("%.1f", 100 * r.audit_vs_training) << " % (by volunteers "
                << format("%.1f", 100 * r.twin_vs_training) << " %) for " << format("%.1f", 100 * r.audited_share)
                << " % of results replayed (" << format("%.1f", 100 * r.overruled_share)
                << " % for a flag the replay overruled" << (r.overruled_flags.empty() ? "" : ": " + r.overruled_flags)
                << "), " << format("%.1f", 100 * r.unauditable_share)
                << " % drawn but not replayable); with the replicas' extra copies ("
                << format("%.1f", 100 * r.replica_vs_training) << " %) every check costs "
                << format("%.1f", 100 * r.all_checks_vs_training) << " %\n";
        if (r.gain_median != 0)
            out << "    honest gain per step p10 / median / p90: " << format("%.5f", r.gain_p10) << " / "
                << format("%.5f", r.gain_median) << " / " << format("%.5f", r.gain_p90) << " (calibration "
                << format("%.5f", r.calibration_gain) << ")\n";
        if (r.guard.evaluations > 0) {
            out << "    divergence guard: " << r.guard.evaluations << " evaluations, highest loss "
                << format("%.2f", r.guard.highest_ratio) << "x the best before it; "
                << (r.guard.actions.empty() ? std::string("never acted")
                                            : "ACTED " + std::to_string(r.guard.actions.size()) + "x")
                << (r.guard.paused ? "; the task was PAUSED, which ended the run" : "") << "\n";
            for (const auto& action : r.guard.actions) out << "      " << action << "\n";
        }
    }
}

}  // namespace tessera::bench
