// CurveEvaluator: coalesced evaluations of model snapshots on the work pool.
#include "curve_evaluator.h"

#include "logger.h"

namespace tessera::server {

void CurveEvaluator::version_committed(std::int64_t version, bool now_or_soon, const std::function<Model()>& snapshot) {
    std::lock_guard lock(mutex_);
    if (version < newest_) return;
    if (version > newest_) {
        newest_ = version;
        newest_model_.reset();
    }
    if (newest_ <= launched_) return;  // its evaluation is done or under way
    if (in_flight_) {                  // launched when that one ends, if wanted or due by then
        wanted_ = wanted_ || now_or_soon;
        if (!newest_model_) newest_model_ = snapshot();
        return;
    }
    bool due = last_started_at_ < 0 || clock_() - last_started_at_ >= interval_s_;
    if (now_or_soon || due) {
        if (!newest_model_) newest_model_ = snapshot();
        launch_locked();
    }
}

void CurveEvaluator::launch_locked() {
    in_flight_ = true;
    wanted_ = false;
    launched_ = newest_;
    last_started_at_ = clock_();
    bool full = last_started_at_ - last_full_at_ >= full_interval_s_;
    if (full) last_full_at_ = last_started_at_;
    auto model = std::move(newest_model_);
    newest_model_.reset();
    executor_([self = shared_from_this(), version = launched_, model = std::move(model), full] {
        self->evaluate(version, model, full);
    });
}

void CurveEvaluator::evaluate(std::int64_t version, const Model& model, bool full) {
    auto result = probes_->evaluate(*model, full ? kWholeValidationSet : samples_);
    if (result) {
        ValidationResult figures{result->loss, result->accuracy, result->samples, full};
        if (auto status = store_.set_validation_result(task_id_, version, figures); !status)
            common::process_log().error("evaluation",
                                        "evaluation of version " + std::to_string(version) + ": " + status.message());
        if (observer_) observer_(version, result->loss, model);
    } else {
        common::process_log().error("evaluation",
                                    "evaluation of version " + std::to_string(version) + ": " + result.message());
    }
    std::lock_guard lock(mutex_);
    in_flight_ = false;
    bool due = clock_() - last_started_at_ >= interval_s_;
    if (newest_ > version && newest_model_ && (wanted_ || due)) launch_locked();
}

}  // namespace tessera::server
