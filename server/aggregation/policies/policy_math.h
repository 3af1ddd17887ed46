// Arithmetic the merge policies share: checking an arrival against the model, weighting it,
// adding a scaled step, means over buffered deltas. Internal to server/aggregation.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

#include "delta_codec.h"
#include "merge_policy.h"
#include "result.h"

namespace tessera::server::policy_math {

// True when every value is finite (the norm is accumulated in double).
bool all_finite(const common::NamedTensors& tensors);

// Staleness measured in units of the fleet's concurrency: an arrival's concurrency C divided
// by the results one version folds in, rounded up, and at least 1.
std::int64_t concurrency_versions(std::int64_t concurrency, std::int64_t results_per_version);

// Checks one arrival against the model and turns Δ into s(τ, C_v)·clip(Δ). On an error the
// arrival is left as it was.
common::Result<common::NamedTensors> weigh(const MergeSettings& settings, const common::NamedTensors& model,
                                           IncomingDelta& in, std::int64_t concurrency_versions);

// θ ← θ + factor·step, coordinate by coordinate, in float.
void add_scaled(common::NamedTensors& model, const common::NamedTensors& step, double factor);

// Coordinate-wise mean after dropping `drop` highest and lowest values per coordinate.
common::NamedTensors trimmed_mean(const std::vector<common::NamedTensors>& deltas, std::size_t drop);

// A copy of `model` with every value 0.
common::NamedTensors zeros_like(const common::NamedTensors& model);

// An error unless `state` is empty: for the policies that keep no optimizer state.
common::Status refuse_state(PolicyKind kind, const common::NamedTensors& state);

}  // namespace tessera::server::policy_math
