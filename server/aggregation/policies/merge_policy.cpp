// The fedasync, fedbuff and diloco policies (diloco-dn is in delayed_nesterov.cpp), and the
// settings' names and ranges.
#include "merge_policy.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cmath>
#include <utility>

#include "delayed_nesterov.h"
#include "policy_math.h"
#include "tensor_math.h"

namespace tessera::server {
namespace {

using common::NamedTensors;
using policy_math::add_scaled;
using policy_math::refuse_state;

std::string format_number(double value) {
    char buffer[64];
    auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
    return ec == std::errc{} ? std::string(buffer, end) : std::string("?");
}

common::Error out_of_range(std::string_view field, std::string_view wanted, double value) {
    return common::make_error(std::string(field) + " must be " + std::string(wanted) + ", got " + format_number(value));
}

class FedAsyncPolicy final : public MergePolicy {
public:
    explicit FedAsyncPolicy(const MergeSettings& settings) : settings_(settings) {}

    // One pass for the norm (finite check and clip), one for θ += η·s(τ)·clip·Δ: the merge loop
    // moves 16 bytes per parameter where weigh-then-add would move 28.
    common::Result<MergeOutcome> add(NamedTensors& model, IncomingDelta delta) override {
        if (auto status = check_same_layout(model, delta.delta); !status)
            return common::with_context("delta '" + delta.id + "'", status.error());
        const double norm = l2_norm(delta.delta);
        if (!std::isfinite(norm)) return common::make_error("delta '" + delta.id + "': non-finite values");
        const double clip = settings_.clip_norm > 0 && norm > settings_.clip_norm ? settings_.clip_norm / norm : 1.0;
        // One result per version: C_v is the concurrency itself.
        const std::int64_t c = policy_math::concurrency_versions(delta.concurrency, 1);
        const double share = std::pow(static_cast<double>(c), -settings_.concurrency_exponent);
        add_scaled(model, delta.delta, settings_.server_lr * settings_.staleness.weight(delta.staleness, c) * clip * share);
        return MergeOutcome{true, {std::move(delta.id)}};
    }
    std::vector<std::string> pending_ids() const override { return {}; }
    NamedTensors optimizer_state() const override { return {}; }
    common::Status load_optimizer_state(const NamedTensors& state, const NamedTensors&) override {
        return refuse_state(PolicyKind::FedAsync, state);
    }

private:
    MergeSettings settings_;
};

// Buffers weighted deltas and steps once buffer_size of them have arrived.
class BufferedPolicy : public MergePolicy {
public:
    explicit BufferedPolicy(const MergeSettings& settings) : settings_(settings) {}

    common::Result<MergeOutcome> add(NamedTensors& model, IncomingDelta delta) override {
        auto weighted = policy_math::weigh(
            settings_, model, delta, policy_math::concurrency_versions(delta.concurrency, settings_.buffer_size));
        if (!weighted) return weighted.error();
        if (static_cast<std::int64_t>(deltas_.size()) + 1 < settings_.buffer_size) {
            ids_.push_back(std::move(delta.id));
            deltas_.push_back(std::move(weighted.value()));
            return MergeOutcome{};
        }
        // Everything is checked before the buffer changes, so an error leaves it as it was.
        for (std::size_t k = 0; k < deltas_.size(); ++k)
            if (auto status = check_same_layout(model, deltas_[k]); !status)
                return common::with_context("model layout changed since delta '" + ids_[k] + "' was buffered",
                                            status.error());
        if (auto status = check_state(model); !status) return status.error();
        ids_.push_back(std::move(delta.id));
        deltas_.push_back(std::move(weighted.value()));
        step(model, deltas_);
        deltas_.clear();
        return MergeOutcome{true, std::exchange(ids_, {})};
    }
    std::vector<std::string> pending_ids() const override { return ids_; }

protected:
    // Checks the policy's own state against the model before a step.
    virtual common::Status check_state(const NamedTensors& model) = 0;
    // Folds the weighted deltas s_i·Δ_i into the model.
    virtual void step(NamedTensors& model, const std::vector<NamedTensors>& deltas) = 0;

    MergeSettings settings_;

private:
    std::vector<std::string> ids_;
    std::vector<NamedTensors> deltas_;
};

class FedBuffPolicy final : public BufferedPolicy {
public:
    using BufferedPolicy::BufferedPolicy;

    NamedTensors optimizer_state() const override { return {}; }
    common::Status load_optimizer_state(const NamedTensors& state, const NamedTensors&) override {
        return refuse_state(PolicyKind::FedBuff, state);
    }

private:
    common::Status check_state(const NamedTensors&) override { return {}; }

    void step(NamedTensors& model, const std::vector<NamedTensors>& deltas) override {
        // floor(trim·K), nudged so that 0.29·100 = 28.999… still drops 29, and capped so at
        // least one value per coordinate remains.
        const std::size_t k = deltas.size();
        const double exact = settings_.trim_fraction * static_cast<double>(k);
        const auto drop = std::min(static_cast<std::size_t>(std::floor(exact + 1e-9)), (k - 1) / 2);
        add_scaled(model, policy_math::trimmed_mean(deltas, drop), settings_.server_lr);
    }
};

class DiLoCoPolicy final : public BufferedPolicy {
public:
    using BufferedPolicy::BufferedPolicy;

    NamedTensors optimizer_state() const override { return momentum_; }
    common::Status load_optimizer_state(const NamedTensors& state, const NamedTensors& model) override {
        if (!state.empty()) {
            if (auto status = check_same_layout(model, state); !status)
                return common::with_context("diloco momentum", status.error());
            if (!policy_math::all_finite(state)) return common::make_error("diloco momentum: non-finite values");
        }
        momentum_ = state;
        return {};
    }

private:
    common::Status check_state(const NamedTensors& model) override {
        if (momentum_.empty()) return {};
        if (auto status = check_same_layout(model, momentum_); !status)
            return common::with_context("diloco momentum", status.error());
        return {};
    }

    void step(NamedTensors& model, const std::vector<NamedTensors>& deltas) override {
        if (momentum_.empty()) momentum_ = policy_math::zeros_like(model);
        // The buffer holds s_i·Δ_i, so the mean pseudo-gradient ḡ is minus their mean.
        const NamedTensors mean_delta = policy_math::trimmed_mean(deltas, 0);
        const double mu = settings_.momentum;
        const double lr = settings_.server_lr;
        for (std::size_t t = 0; t < model.size(); ++t)
            for (std::size_t j = 0; j < model[t].values.size(); ++j) {
                const double g = -static_cast<double>(mean_delta[t].values[j]);
                const double m = mu * momentum_[t].values[j] + g;
                momentum_[t].values[j] = static_cast<float>(m);
                model[t].values[j] = static_cast<float>(model[t].values[j] - lr * (g + mu * m));
            }
    }

    NamedTensors momentum_;  // empty until the first outer step: m = 0
};

}  // namespace

std::string_view policy_name(PolicyKind kind) {
    switch (kind) {
        case PolicyKind::FedAsync: return "fedasync";
        case PolicyKind::FedBuff: return "fedbuff";
        case PolicyKind::DiLoCo: return "diloco";
        case PolicyKind::DiLoCoDN: return "diloco-dn";
    }
    return "fedasync";
}

std::optional<PolicyKind> policy_from_name(std::string_view name) {
    for (auto kind : {PolicyKind::FedAsync, PolicyKind::FedBuff, PolicyKind::DiLoCo, PolicyKind::DiLoCoDN})
        if (policy_name(kind) == name) return kind;
    return std::nullopt;
}

common::Status validate_settings(const MergeSettings& s) {
    if (!std::isfinite(s.server_lr) || s.server_lr <= 0)
        return out_of_range("server_lr", "a finite number > 0", s.server_lr);
    if (!std::isfinite(s.clip_norm) || s.clip_norm < 0)
        return out_of_range("clip_norm", "a finite number >= 0", s.clip_norm);
    if (s.buffer_size < 1) return common::make_error("buffer_size must be >= 1, got " + std::to_string(s.buffer_size));
    if (!(s.trim_fraction >= 0 && s.trim_fraction < 0.5))
        return out_of_range("trim_fraction", "in [0, 0.5)", s.trim_fraction);
    if (!(s.momentum >= 0 && s.momentum < 1)) return out_of_range("momentum", "in [0, 1)", s.momentum);
    if (!(s.concurrency_exponent >= 0 && s.concurrency_exponent <= 2))
        return out_of_range("concurrency_exponent", "in [0, 2]", s.concurrency_exponent);
    if (auto status = validate_staleness(s.staleness); !status) return status.error();
    return {};
}

common::Result<std::unique_ptr<MergePolicy>> make_merge_policy(const MergeSettings& settings) {
    if (auto status = validate_settings(settings); !status) return status.error();
    std::unique_ptr<MergePolicy> policy;
    switch (settings.kind) {
        case PolicyKind::FedAsync: policy = std::make_unique<FedAsyncPolicy>(settings); break;
        case PolicyKind::FedBuff: policy = std::make_unique<FedBuffPolicy>(settings); break;
        case PolicyKind::DiLoCo: policy = std::make_unique<DiLoCoPolicy>(settings); break;
        case PolicyKind::DiLoCoDN: policy = make_delayed_nesterov(settings); break;
    }
    if (!policy) return common::make_error("unknown merge policy kind");
    return policy;
}

double max_delayed_outer_step(double momentum) {
    const double mu = momentum;
    if (mu <= 0) return 1.0;
    const double b = 1 - mu * mu;
    return (std::sqrt(b * b + 4 * mu * mu * (1 - mu)) - b) / (2 * mu * mu);
}

common::Status check_async_stability(const MergeSettings& settings) {
    if (settings.kind != PolicyKind::DiLoCo) return {};
    if (auto status = validate_settings(settings); !status) return status;
    const double weight = settings.staleness.weight(1, 1);
    const double step = settings.server_lr * weight;
    const double limit = max_delayed_outer_step(settings.momentum);
    if (step <= limit * (1 + 1e-9)) return {};
    char text[512];
    std::snprintf(text, sizeof text,
                  "diloco: server_lr %g with momentum %g diverges once results arrive an outer step late (more "
                  "volunteers at work than the buffer of %lld): the step at staleness 1 (server_lr x s(1) = %.3g) "
                  "must be at most %.3g at this momentum, so server_lr <= %.3g with staleness %s (at momentum 0, "
                  "0.5, 0.9: server_lr x s(1) <= 1, %.2f, %.2f); docs/operations.md, \"diloco's outer step\"",
                  settings.server_lr, settings.momentum, static_cast<long long>(settings.buffer_size), step, limit,
                  limit / weight, settings.staleness.to_string().c_str(), max_delayed_outer_step(0.5),
                  max_delayed_outer_step(0.9));
    return common::make_error(text);
}

std::optional<double> staleness_limit(const MergeSettings& settings, std::int64_t concurrency) {
    const auto& s = settings.staleness;
    if (s.kind != Staleness::Kind::Concurrency || s.c <= 0) return std::nullopt;
    // One version per result for fedasync and diloco-dn, one per buffer for fedbuff and diloco.
    const bool buffered = settings.kind == PolicyKind::FedBuff || settings.kind == PolicyKind::DiLoCo;
    const auto versions = policy_math::concurrency_versions(concurrency, buffered ? settings.buffer_size : 1);
    return s.c * static_cast<double>(std::max<std::int64_t>(versions, 1));
}

}  // namespace tessera::server
