// Delayed Nesterov (delayed_nesterov.h). Per-coordinate arithmetic in double, stored as f32,
// like the synchronous DiLoCo step it reproduces.
#include "delayed_nesterov.h"

#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "policy_math.h"
#include "tensor_math.h"

namespace tessera::server {
namespace {

using common::NamedTensors;

constexpr std::string_view kMomentumPrefix = "momentum/";
constexpr std::string_view kPendingPrefix = "pending/";
constexpr std::string_view kCountName = "pending_count";
// The count is stored as one f32: exact below 2^24.
constexpr double kMaxCount = 1 << 24;

class DelayedNesterovPolicy final : public MergePolicy {
public:
    explicit DelayedNesterovPolicy(const MergeSettings& settings) : settings_(settings) {}

    common::Result<MergeOutcome> add(NamedTensors& model, IncomingDelta delta) override {
        // One result per version: staleness counts in units of the concurrency itself.
        auto weighted = policy_math::weigh(settings_, model, delta, policy_math::concurrency_versions(delta.concurrency, 1));
        if (!weighted) return weighted.error();
        if (auto status = check_state(model); !status) return status.error();
        if (pending_.empty()) pending_ = policy_math::zeros_like(model);
        apply_arrival(model, *weighted);
        if (++count_ >= settings_.buffer_size) step_momentum(model);
        return MergeOutcome{true, {std::move(delta.id)}};
    }

    std::vector<std::string> pending_ids() const override { return {}; }

    NamedTensors optimizer_state() const override {
        if (momentum_.empty() && pending_.empty()) return {};
        NamedTensors state;
        const NamedTensors& layout = momentum_.empty() ? pending_ : momentum_;
        append_prefixed(state, momentum_.empty() ? policy_math::zeros_like(layout) : momentum_, kMomentumPrefix);
        append_prefixed(state, pending_.empty() ? policy_math::zeros_like(layout) : pending_, kPendingPrefix);
        state.push_back({std::string(kCountName), {1}, {static_cast<float>(count_)}});
        return state;
    }

    common::Status load_optimizer_state(const NamedTensors& state, const NamedTensors& model) override {
        if (state.empty()) {
            momentum_.clear();
            pending_.clear();
            count_ = 0;
            return {};
        }
        std::map<std::string_view, const common::NamedTensor*> by_name;
        for (const auto& t : state) by_name.emplace(t.name, &t);
        if (by_name.size() != 2 * model.size() + 1)
            return common::make_error("diloco-dn state: expected " + std::to_string(2 * model.size() + 1) +
                                      " tensors (momentum, pending, pending_count), got " +
                                      std::to_string(state.size()));
        auto momentum = extract(by_name, model, kMomentumPrefix);
        if (!momentum) return momentum.error();
        auto pending = extract(by_name, model, kPendingPrefix);
        if (!pending) return pending.error();
        auto count = by_name.find(kCountName);
        if (count == by_name.end() || count->second->values.size() != 1)
            return common::make_error("diloco-dn state: missing tensor 'pending_count' of one value");
        const double n = count->second->values[0];
        if (!(n >= 0 && n < kMaxCount && n == std::floor(n)))
            return common::make_error("diloco-dn state: pending_count must be a whole number >= 0, got " +
                                      std::to_string(n));
        momentum_ = std::move(*momentum);
        pending_ = std::move(*pending);
        count_ = static_cast<std::int64_t>(n);
        return {};
    }

private:
    static void append_prefixed(NamedTensors& out, const NamedTensors& tensors, std::string_view prefix) {
        for (const auto& t : tensors) out.push_back({std::string(prefix) + t.name, t.shape, t.values});
    }

    // The tensors named prefix + each model tensor's name, in the model's order, checked.
    static common::Result<NamedTensors> extract(const std::map<std::string_view, const common::NamedTensor*>& by_name,
                                                const NamedTensors& model, std::string_view prefix) {
        NamedTensors part;
        for (const auto& t : model) {
            const std::string name = std::string(prefix) + t.name;
            auto found = by_name.find(name);
            if (found == by_name.end()) return common::make_error("diloco-dn state: missing tensor '" + name + "'");
            part.push_back({t.name, found->second->shape, found->second->values});
        }
        const std::string what = "diloco-dn " + std::string(prefix.substr(0, prefix.size() - 1));
        if (auto status = check_same_layout(model, part); !status) return common::with_context(what, status.error());
        if (!policy_math::all_finite(part)) return common::make_error(what + ": non-finite values");
        return part;
    }

    common::Status check_state(const NamedTensors& model) const {
        if (!momentum_.empty())
            if (auto status = check_same_layout(model, momentum_); !status)
                return common::with_context("diloco-dn momentum", status.error());
        if (!pending_.empty())
            if (auto status = check_same_layout(model, pending_); !status)
                return common::with_context("diloco-dn pending sum", status.error());
        return {};
    }

    // w = s·clip(Δ) = −g: A ← A + g and θ ← θ − ε·g/N.
    void apply_arrival(NamedTensors& model, const NamedTensors& weighted) {
        const double step = settings_.server_lr / static_cast<double>(settings_.buffer_size);
        for (std::size_t t = 0; t < model.size(); ++t)
            for (std::size_t j = 0; j < model[t].values.size(); ++j) {
                const double g = -static_cast<double>(weighted[t].values[j]);
                pending_[t].values[j] = static_cast<float>(pending_[t].values[j] + g);
                model[t].values[j] = static_cast<float>(model[t].values[j] - step * g);
            }
    }

    // m ← β·m + A/n; θ ← θ − ε·β·m; A ← 0; n ← 0. Dividing by n keeps a mean should the
    // period have changed since the last step.
    void step_momentum(NamedTensors& model) {
        if (momentum_.empty()) momentum_ = policy_math::zeros_like(model);
        const double beta = settings_.momentum;
        const double lr = settings_.server_lr;
        const double n = static_cast<double>(count_);
        for (std::size_t t = 0; t < model.size(); ++t)
            for (std::size_t j = 0; j < model[t].values.size(); ++j) {
                const double m = beta * momentum_[t].values[j] + pending_[t].values[j] / n;
                momentum_[t].values[j] = static_cast<float>(m);
                model[t].values[j] = static_cast<float>(model[t].values[j] - lr * beta * m);
                pending_[t].values[j] = 0.0f;
            }
        count_ = 0;
    }

    MergeSettings settings_;
    NamedTensors momentum_;  // empty until the first momentum step: m = 0
    NamedTensors pending_;   // A, the pseudo-gradients gathered since; empty = 0
    std::int64_t count_ = 0; // n
};

}  // namespace

std::unique_ptr<MergePolicy> make_delayed_nesterov(const MergeSettings& settings) {
    return std::make_unique<DelayedNesterovPolicy>(settings);
}

}  // namespace tessera::server
