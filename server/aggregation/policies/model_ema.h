// The exponential moving average of a task's merged model (PixArt-α and AT-1 sample and
// export their EMA weights): after each new version v, ema ← d·ema + (1 − d)·θ with
// d = min(decay, (1 + v) / (10 + v)), the usual warm-up, so that early on the average follows
// the model instead of holding on to the random start. It is saved at checkpoints beside the
// merge policy's state, as tensors named "ema/" + the model's names. Not thread-safe.
#pragma once

#include <cstdint>
#include <string_view>

#include "delta_codec.h"
#include "result.h"

namespace tessera::server {

inline constexpr std::string_view kEmaPrefix = "ema/";

// The decay applied when version `version` (≥ 1) is made.
double ema_decay_at(double decay, std::int64_t version);

// ema ← d·ema + (1 − d)·model, in f32; the layouts must be the same.
common::Status ema_update(common::NamedTensors& ema, const common::NamedTensors& model, double d);

// A checkpoint's state file: the policy's tensors, then the EMA's, prefixed.
common::NamedTensors with_ema(common::NamedTensors policy_state, const common::NamedTensors& ema);

// The divergence guard's tensors are named with this prefix (divergence_guard.h).
inline constexpr std::string_view kGuardPrefix = "guard/";

struct SavedState {
    common::NamedTensors policy;  // what MergePolicy::load_optimizer_state takes
    common::NamedTensors ema;     // named like the model; empty in checkpoints without one
    common::NamedTensors guard;   // named "guard/…" as saved; empty unless the guard has acted
};
SavedState split_saved_state(common::NamedTensors state);

}  // namespace tessera::server
