// What a fleet simulation measures: the loss curve by merged samples, the equal-samples point,
// the divergence guard's evaluations and every unit's fate.
#include "fleet_simulation.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>

#include "caption_judge.h"

namespace tessera::bench {

using server::AssignmentState;

common::Status Simulation::settle(std::int64_t version_before) {
    if (server_->version() == version_before && unsettled_.empty()) return {};
    std::vector<std::string> still;
    for (const auto& id : unsettled_) {
        auto record = server_->store().assignment(id);
        if (!record) return record.error();
        auto state = *record ? (*record)->state : AssignmentState::Rejected;
        if (state == AssignmentState::Merged) {
            merged_samples_ += issued_[id].samples;
            ++result_.attacks[issued_[id].attack].merged;
        } else if (state == AssignmentState::Accepted || state == AssignmentState::Validated) {
            still.push_back(id);
        }
    }
    unsettled_ = std::move(still);
    if (done_ || merged_samples_ < next_milestone()) return {};
    while (merged_samples_ >= next_milestone()) ++milestones_passed_;  // one point, however many passed
    if (auto status = evaluate_point(); !status) return status;
    if (merged_samples_ < settings_.sample_budget) return {};
    if (!budget_reached_) {
        budget_reached_ = true;
        if (auto status = evaluate_budget_point(); !status) return status;
    }
    bool target_open = settings_.target_loss > 0 && result_.curve.back().loss > settings_.target_loss;
    bool overrun_left =
        static_cast<double>(merged_samples_) < settings_.overrun * static_cast<double>(settings_.sample_budget);
    done_ = !(target_open && overrun_left);
    return {};
}

std::int64_t Simulation::next_milestone() const {
    return curve_milestone(settings_.sample_budget, settings_.curve_points, milestones_passed_ + 1,
                           settings_.curve_spacing);
}

common::Status Simulation::evaluate_budget_point() {
    result_.budget_point = result_.curve.size() - 1;
    auto full = server_->evaluate(std::numeric_limits<std::int64_t>::max());
    if (!full) return full.error();
    result_.final_loss = full->loss;
    result_.final_accuracy = full->accuracy.value_or(-1);
    result_.budget_weights = server_->true_model();
    return judge_samples(settings_, config_.model, *result_.budget_weights, result_);
}

common::Status Simulation::evaluate_point() {
    auto version = server_->version();
    auto eval = server_->evaluate(curve_samples(settings_));
    if (!eval) return eval.error();
    auto counts = server_->store().staleness_counts(config_.task_id);
    if (!counts) return counts.error();
    std::int64_t merged = 0;
    double total = 0;
    for (const auto& [tau, n] : *counts) {
        merged += n;
        total += static_cast<double>(tau * n);
    }
    CurvePoint point;
    point.virtual_s = clock_.now();
    point.samples = merged_samples_;
    point.version = version;
    point.loss = eval->loss;
    point.accuracy = eval->accuracy.value_or(-1);
    point.staleness = merged > staleness_merged_ ? (total - staleness_total_) / double(merged - staleness_merged_) : 0;
    staleness_merged_ = merged;
    staleness_total_ = total;
    for (const auto& v : volunteers_) point.busy += v.held.empty() ? 0 : 1;
    point.state_bytes = server_->state_usage().total();
    result_.curve.push_back(point);
    if (!settings_.quiet)
        std::cerr << "  " << settings_.run_name << ": t=" << static_cast<std::int64_t>(point.virtual_s)
                  << " s, samples " << point.samples << ", version " << version << ", loss " << point.loss << "\n";
    return {};
}

common::Status Simulation::guard_check() {
    auto version = server_->version();
    if (version == guard_version_ || (guard_at_ >= 0 && clock_.now() - guard_at_ < double(config_.eval_interval_s)))
        return {};
    guard_version_ = version;
    guard_at_ = clock_.now();
    auto eval = server_->evaluate_for_guard();
    if (!eval) return eval.error();
    auto& report = result_.guard;
    ++report.evaluations;
    if (std::isfinite(eval->loss)) {
        if (guard_best_ > 0) report.highest_ratio = std::max(report.highest_ratio, eval->loss / guard_best_);
        if (guard_best_ <= 0 || eval->loss < guard_best_) guard_best_ = eval->loss;
    }
    // A task the guard paused issues no more work: the run ends here (its volunteers would
    // otherwise ask until the virtual-time limit).
    auto task = server_->store().task(config_.task_id);
    if (!task) return task.error();
    if (*task && (*task)->state == server::TaskState::Paused) {
        report.paused = true;
        done_ = true;
    }
    return {};
}

common::Status Simulation::guard_actions() {
    auto events = server_->store().events_after(0, std::numeric_limits<int>::max());
    if (!events) return events.error();
    for (const auto& e : *events) {
        if (e.kind == "audit_passed") {
            auto detail = boost::json::parse(e.detail_json).as_object();
            if (const auto* flag = detail.if_contains("flagged"); flag != nullptr && flag->is_string()) {
                ++result_.server_cost.flags_overruled;
                std::string_view text = flag->get_string();  // "<reason>: <detail>"
                ++result_.server_cost.overruled_by_reason[std::string(text.substr(0, text.find(':')))];
            }
        }
        if (e.kind != "divergence_recovered" && e.kind != "divergence_paused") continue;
        auto detail = boost::json::parse(e.detail_json).as_object();
        result_.guard.actions.push_back(std::string(detail.at("message").as_string()));
    }
    return {};
}

common::Status Simulation::account() {
    double end = clock_.now();
    for (auto& v : volunteers_) {
        if (v.online) result_.online_s += end - v.online_since;
        for (const auto& held : v.held) issued_[held.unit.wu_id].seconds = end - held.issued;
    }
    return account_outcomes(server_->store(), issued_, result_);
}

common::Status judge_samples(const SimSettings& settings, const std::string& model, const common::NamedTensors& weights,
                             RunResult& result) {
    if (settings.judge != nullptr)
        if (auto status = score_run(*settings.judge, model, weights, settings.judge_guidances, result); !status)
            return status;
    if (settings.caption_judge == nullptr) return {};
    return score_run_fidelity(*settings.caption_judge, model, weights, settings.judge_guidances, result);
}

std::int64_t curve_samples(const SimSettings& settings) {
    return settings.eval_samples > 0 ? settings.eval_samples : std::numeric_limits<std::int64_t>::max();
}

}  // namespace tessera::bench
