// The run's loss curve: evaluates committed model versions (the aggregator's true model, handed
// over as a snapshot: between checkpoints it is on no disk) on the validation data, one
// evaluation at a time on the work pool (so validations are never starved), at most one per
// interval while merging goes on, and always the newest version once merging pauses. Points
// are cheap estimates on the first `samples` validation samples; the first evaluation started
// `full_interval_s` or more after the last whole-set one (or after start-up) covers the whole
// validation set instead. Each evaluated loss also goes to an observer (the aggregator's
// divergence guard), with the model it was computed on. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "clock.h"
#include "delta_codec.h"
#include "executor.h"
#include "model_probe.h"
#include "state_dir.h"
#include "store.h"

namespace tessera::server {

// Owned by shared_ptr: an evaluation's job holds it until the job is done.
class CurveEvaluator : public std::enable_shared_from_this<CurveEvaluator> {
public:
    using Model = std::shared_ptr<const common::NamedTensors>;
    // Called on the evaluating thread after each evaluation that gave a loss.
    using Observer = std::function<void(std::int64_t version, double loss, const Model& model)>;
    CurveEvaluator(VersionStore& store, std::shared_ptr<ProbePool> probes, Executor executor, Clock clock,
                   std::string task_id, std::int64_t samples, std::int64_t interval_s, std::int64_t full_interval_s,
                   Observer observer = {})
        : store_(store), probes_(std::move(probes)), executor_(std::move(executor)), clock_(std::move(clock)),
          task_id_(std::move(task_id)), samples_(samples), interval_s_(interval_s), full_interval_s_(full_interval_s),
          last_full_at_(clock_()), observer_(std::move(observer)) {}

    // `version` was committed. `now_or_soon`: evaluate it regardless of the interval (merging
    // paused, or start-up), as soon as the evaluation in flight (if any) is done. `snapshot`
    // copies the version's model; it is called (on the caller's thread) only when the
    // evaluation may need it.
    void version_committed(std::int64_t version, bool now_or_soon, const std::function<Model()>& snapshot);

private:
    void launch_locked();
    void evaluate(std::int64_t version, const Model& model, bool full);

    VersionStore& store_;  // where the figures go
    std::shared_ptr<ProbePool> probes_;
    Executor executor_;
    Clock clock_;
    std::string task_id_;
    std::int64_t samples_;
    std::int64_t interval_s_;
    std::int64_t full_interval_s_;

    std::mutex mutex_;
    bool in_flight_ = false;
    bool wanted_ = false;  // a now_or_soon request came while one was in flight
    std::int64_t newest_ = -1;
    Model newest_model_;          // newest_'s, while an evaluation of it may still be launched
    std::int64_t launched_ = -1;  // the newest version whose evaluation was started
    std::int64_t last_started_at_ = -1;
    std::int64_t last_full_at_;  // when the last whole-set evaluation started (start-up before one)
    Observer observer_;
};

}  // namespace tessera::server
