// Asynchronous DiLoCo with delayed Nesterov momentum (Liu et al. 2024, "Asynchronous
// Local-SGD Training for Language Modeling", arXiv 2401.09135, Algorithm 3 with c = 0).
//
// Every arrival is applied at once without momentum, and every N-th arrival the momentum
// takes the mean of the pseudo-gradients gathered since its last step:
//   each arrival i:     g_i = −s_i·clip(Δ_i);  A ← A + g_i;  θ ← θ − ε·g_i/N;  n ← n + 1
//   when n reaches N:   m ← β·m + A/n;  θ ← θ − ε·β·m;  A ← 0;  n ← 0
// ε is MergeSettings::server_lr, β its momentum, N its buffer_size. Applying Nesterov on every
// arrival instead over-steps by about 1/(1 − β) (their Eq. 5); this does not. With N arrivals
// on one base, the model after the N-th equals synchronous DiLoCo's outer step over the same
// N pseudo-gradients: θ₀ − ε·(ḡ + β·m′), m′ = β·m + ḡ.
#pragma once

#include <memory>

#include "merge_policy.h"

namespace tessera::server {

// The policy for PolicyKind::DiLoCoDN. Its optimizer state (momentum m, the gathered sum A
// and the count n) survives restarts through optimizer_state / load_optimizer_state:
// tensors "momentum/<name>" and "pending/<name>" for every model tensor, and
// "pending_count" of shape [1]. Not thread-safe: the aggregator thread owns it.
std::unique_ptr<MergePolicy> make_delayed_nesterov(const MergeSettings& settings);

}  // namespace tessera::server
