// The divergence guard: judges a task's evaluated validation losses and says when merging has
// blown the model up, so that no policy setting diverges silently (docs/operations.md, "When a
// task diverges"). It trips on a non-finite loss at once, or on the kConsecutive-th evaluation
// above kFactor × the best loss seen so far without the loss coming back within kRecovered × the
// best in between (an oscillating model trips it; an honest spike, which falls back below the
// best at the next version, does not). The aggregator then acts: it returns to the
// best version's model, starts the policy's state afresh and multiplies the server learning
// rate by kLrCut, at most kMaxRecoveries times; past that it returns to the best model and
// pauses the task for the operator. A plain value type, not thread-safe: the aggregator's
// thread owns it.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "delta_codec.h"
#include "model_ema.h"
#include "result.h"

namespace tessera::server {

enum class GuardAction { None, Recover, Pause };

struct GuardVerdict {
    GuardAction action = GuardAction::None;
    std::int64_t version = 0;  // the evaluation that tripped it
    double loss = 0;
    double best_loss = 0;
    std::int64_t best_version = 0;
    std::string reason;  // "non-finite loss" or "loss 3.7 > 1.5 × best 1.09 for 2 evaluations"
};

class DivergenceGuard {
public:
    // Honest runs on the fleet simulator spike above their best loss for one evaluation at most
    // (a stale unit merged) and then fall below it; the diverging ones pass 1.5× and stay above
    // 1.2× (docs/benchmarks.md, "Divergence guard").
    static constexpr double kFactor = 1.5;
    static constexpr double kRecovered = 1.2;
    static constexpr std::int64_t kConsecutive = 2;
    static constexpr std::int64_t kMaxRecoveries = 3;
    static constexpr double kLrCut = 0.5;
    // Saved in a checkpoint's state file beside the policy's state and the EMA, named
    // kGuardPrefix + "state" (model_ema.h).

    struct State {
        double best_loss = std::numeric_limits<double>::infinity();
        std::int64_t best_version = -1;
        std::int64_t strikes = 0;     // evaluations above kFactor × best since one within kRecovered × best
        std::int64_t recoveries = 0;  // times the learning rate was cut
        double lr_scale = 1;          // kLrCut^recoveries: the policy's server_lr is multiplied by it
        std::int64_t from_version = 0;  // evaluations of older versions (before the last return) are ignored
    };

    DivergenceGuard() = default;
    explicit DivergenceGuard(State state) : state_(state) {}

    // One evaluated version. `best` is set when it became the best so far (the caller keeps
    // that version's model as the one to return to). Evaluations of versions older than the
    // last return are ignored.
    GuardVerdict observe(std::int64_t version, double loss, bool* best = nullptr);
    // The aggregator returned to the best model as version `version`: strikes start again, and
    // after a Recover the learning rate is cut (a Pause keeps it).
    void returned(std::int64_t version, GuardAction action);

    const State& state() const { return state_; }
    // True when it holds something a restart must not lose: the rate was cut.
    bool acted() const { return state_.recoveries > 0; }

    // The state as one tensor "guard/state" (empty when it has not acted), and back.
    common::NamedTensors to_tensors() const;
    static common::Result<DivergenceGuard> from_tensors(const common::NamedTensors& tensors);

private:
    State state_;
};

// The setting in which the aggregator tells the dashboard what the guard last did for a task
// (the event's detail, JSON).
inline std::string divergence_setting_key(const std::string& task_id) { return "divergence/" + task_id; }

}  // namespace tessera::server
