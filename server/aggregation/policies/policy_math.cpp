// The merge policies' shared arithmetic (policy_math.h).
#include "policy_math.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "tensor_math.h"

namespace tessera::server::policy_math {

using common::NamedTensors;

bool all_finite(const NamedTensors& tensors) { return std::isfinite(l2_norm(tensors)); }

std::int64_t concurrency_versions(std::int64_t concurrency, std::int64_t results_per_version) {
    const std::int64_t c = std::max<std::int64_t>(concurrency, 1);
    const std::int64_t r = std::max<std::int64_t>(results_per_version, 1);
    return (c + r - 1) / r;
}

common::Result<NamedTensors> weigh(const MergeSettings& settings, const NamedTensors& model, IncomingDelta& in,
                                   std::int64_t concurrency_versions) {
    if (auto status = check_same_layout(model, in.delta); !status)
        return common::with_context("delta '" + in.id + "'", status.error());
    if (!all_finite(in.delta)) return common::make_error("delta '" + in.id + "': non-finite values");
    clip_norm_in_place(in.delta, settings.clip_norm);
    scale_in_place(in.delta, settings.staleness.weight(in.staleness, concurrency_versions));
    return std::move(in.delta);
}

// Float arithmetic lets the loop run at memory speed; the values are floats anyway.
void add_scaled(NamedTensors& model, const NamedTensors& step, double factor) {
    const auto f = static_cast<float>(factor);
    for (std::size_t t = 0; t < model.size(); ++t) {
        float* m = model[t].values.data();
        const float* s = step[t].values.data();
        const std::size_t n = model[t].values.size();
        for (std::size_t j = 0; j < n; ++j) m[j] += f * s[j];
    }
}

NamedTensors trimmed_mean(const std::vector<NamedTensors>& deltas, std::size_t drop) {
    NamedTensors mean = deltas.front();
    const std::size_t kept = deltas.size() - 2 * drop;
    std::vector<double> column(deltas.size());
    for (std::size_t t = 0; t < mean.size(); ++t)
        for (std::size_t j = 0; j < mean[t].values.size(); ++j) {
            for (std::size_t k = 0; k < deltas.size(); ++k) column[k] = deltas[k][t].values[j];
            if (drop > 0) std::sort(column.begin(), column.end());
            double sum = 0;
            for (std::size_t k = drop; k < drop + kept; ++k) sum += column[k];
            mean[t].values[j] = static_cast<float>(sum / static_cast<double>(kept));
        }
    return mean;
}

NamedTensors zeros_like(const NamedTensors& model) {
    NamedTensors zeros = model;
    for (auto& t : zeros) std::fill(t.values.begin(), t.values.end(), 0.0f);
    return zeros;
}

common::Status refuse_state(PolicyKind kind, const NamedTensors& state) {
    if (state.empty()) return {};
    return common::make_error(std::string(policy_name(kind)) + " keeps no optimizer state, got " +
                              std::to_string(state.size()) + " tensors");
}

}  // namespace tessera::server::policy_math
