// Aggregator: what it does when the divergence guard trips (docs/operations.md, "When a task
// diverges").
#include "aggregator.h"

#include <cmath>

#include <boost/json.hpp>

#include "logger.h"

namespace tessera::server {

void Aggregator::judge(const Evaluation& evaluation) {
    auto verdict = guard_.observe(evaluation.version, evaluation.loss);
    // The return point: the best model evaluated since start that is not itself a strike (after
    // a restart the best one ever is in no memory).
    const double loss = evaluation.loss;
    if (verdict.action == GuardAction::None && evaluation.version >= guard_.state().from_version &&
        std::isfinite(loss) && loss <= DivergenceGuard::kFactor * guard_.state().best_loss &&
        (!best_model_ || loss < best_model_loss_)) {
        best_model_ = evaluation.model;
        best_model_loss_ = loss;
        best_model_version_ = evaluation.version;
    }
    if (verdict.action == GuardAction::None) return;
    if (auto status = act_on(verdict); !status)
        common::process_log().error(
            "divergence", "aggregator: acting on a divergence of task " + task_.record.id + ": " + status.message(),
            {{"task_id", task_.record.id}});
}

// Back to the best evaluated model as a new version, the policy afresh at the cut rate (or, past
// the recoveries, at the rate it has) with its buffered results queued again; a Pause also pauses
// the task. Without a best model to return to (none evaluated since start) it pauses the task.
common::Status Aggregator::act_on(const GuardVerdict& verdict) {
    const auto& task_id = task_.record.id;
    const bool can_return = best_model_ != nullptr;
    const GuardAction action = can_return ? verdict.action : GuardAction::Pause;
    const double lr_before = task_.config.merge.server_lr * guard_.state().lr_scale;
    const std::int64_t diverged_at = version_;
    if (can_return) {
        DivergenceGuard next = guard_;
        next.returned(version_ + 1, action);
        auto settings = task_.config.merge;
        settings.server_lr *= next.state().lr_scale;
        auto policy = make_merge_policy(settings);
        if (!policy) return policy.error();
        // The results the policy buffered are merged again into the returned model (rare: read).
        std::vector<AcceptedResult> buffered;
        for (const auto& id : policy_->pending_ids()) {
            auto found = store_.assignment(id);
            if (!found) return found.error();
            if (*found) buffered.push_back({id, 0, (*found)->base_version, (*found)->concurrency.value_or(1)});
        }
        model_ = *best_model_;
        policy_ = std::move(*policy);
        guard_ = std::move(next);
        if (ema_) ema_ = model_;  // the EMA took in the diverged versions too
        if (auto committed = commit({}, true); !committed) {
            retry_pending_ = true;
            if (hooks_.commit_failed) hooks_.commit_failed();
            if (auto restored = restore_committed(); !restored)
                return common::make_error(committed.message() +
                                          "; restoring the committed version failed too: " + restored.message());
            return common::make_error("returning to version " + std::to_string(best_model_version_) + ": " +
                                      committed.message() + " (back at version " + std::to_string(version_) + ")");
        }
        std::lock_guard lock(mutex_);
        queue_.insert(queue_.begin(), buffered.begin(), buffered.end());
    } else {
        guard_.returned(version_ + 1, action);
    }
    if (action == GuardAction::Pause)
        if (auto status = store_.set_task_state(task_id, TaskState::Paused, clock_()); !status) return status;

    return report_divergence({verdict, action, can_return, diverged_at, lr_before});
}

// The error log line, the setting the dashboard shows and the event, for one act_on.
common::Status Aggregator::report_divergence(const DivergenceReport& report) {
    const auto& task_id = task_.record.id;
    const auto& verdict = report.verdict;
    const GuardAction action = report.action;
    const bool can_return = report.returned;
    const std::int64_t diverged_at = report.diverged_at;
    const double lr_before = report.lr_before;
    const double lr_now = task_.config.merge.server_lr * guard_.state().lr_scale;
    std::string what = "task " + task_id + " diverged at version " + std::to_string(diverged_at) +
                       " (evaluation of version " + std::to_string(verdict.version) + ": " + verdict.reason + "); ";
    if (can_return)
        what += "returned to the model of version " + std::to_string(best_model_version_) + " (loss " +
                std::to_string(best_model_loss_) + ") as version " + std::to_string(version_) + ", ";
    if (action == GuardAction::Recover)
        what += "server learning rate " + std::to_string(lr_before) + " -> " + std::to_string(lr_now) + " (recovery " +
                std::to_string(guard_.state().recoveries) + " of " + std::to_string(DivergenceGuard::kMaxRecoveries) +
                ")";
    else
        what += "task paused for the operator (" +
                std::string(can_return ? "recoveries used up" : "no evaluated model to return to since start") +
                "; `tessera-server task resume` merges and issues again)";
    common::process_log().error("divergence", what, {{"task_id", task_id}});
    boost::json::object detail{
        {"task_id", task_id},
        {"action", action == GuardAction::Recover ? "recovered" : "paused"},
        {"diverged_version", diverged_at},
        {"evaluated_version", verdict.version},
        {"loss", std::isfinite(verdict.loss) ? boost::json::value(verdict.loss) : nullptr},
        {"best_loss", std::isfinite(verdict.best_loss) ? boost::json::value(verdict.best_loss) : nullptr},
        {"best_version", verdict.best_version},
        {"returned_to", can_return ? boost::json::value(best_model_version_) : nullptr},
        {"version", version_.load()},
        {"server_lr", lr_now},
        {"recoveries", guard_.state().recoveries},
        {"max_recoveries", DivergenceGuard::kMaxRecoveries},
        {"at", clock_()},
        {"message", what}};
    const auto json = boost::json::serialize(detail);
    if (auto status = store_.set_setting(divergence_setting_key(task_id), json); !status) return status;
    return store_.add_event(action == GuardAction::Recover ? "divergence_recovered" : "divergence_paused", json,
                            clock_());
}

}  // namespace tessera::server
