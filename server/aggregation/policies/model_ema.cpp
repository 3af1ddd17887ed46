// The model's EMA and its place in a checkpoint's state file.
#include "model_ema.h"

#include <algorithm>

#include "tensor_math.h"

namespace tessera::server {
namespace {

constexpr double kWarmupOffset = 10;  // d ≤ (1 + v) / (10 + v)

}  // namespace

double ema_decay_at(double decay, std::int64_t version) {
    auto v = static_cast<double>(std::max<std::int64_t>(version, 0));
    return std::min(decay, (1.0 + v) / (kWarmupOffset + v));
}

common::Status ema_update(common::NamedTensors& ema, const common::NamedTensors& model, double d) {
    if (auto layout = check_same_layout(model, ema); !layout) return common::with_context("ema", layout.error());
    auto keep = static_cast<float>(d), take = static_cast<float>(1.0 - d);
    for (std::size_t i = 0; i < ema.size(); ++i) {
        auto& average = ema[i].values;
        const auto& current = model[i].values;
        for (std::size_t j = 0; j < average.size(); ++j) average[j] = keep * average[j] + take * current[j];
    }
    return {};
}

common::NamedTensors with_ema(common::NamedTensors policy_state, const common::NamedTensors& ema) {
    for (const auto& t : ema) policy_state.push_back({std::string(kEmaPrefix) + t.name, t.shape, t.values});
    return policy_state;
}

SavedState split_saved_state(common::NamedTensors state) {
    SavedState split;
    for (auto& t : state) {
        if (t.name.starts_with(kEmaPrefix)) {
            t.name.erase(0, kEmaPrefix.size());
            split.ema.push_back(std::move(t));
        } else if (t.name.starts_with(kGuardPrefix)) {
            split.guard.push_back(std::move(t));
        } else {
            split.policy.push_back(std::move(t));
        }
    }
    return split;
}

}  // namespace tessera::server
