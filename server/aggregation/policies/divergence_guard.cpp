// The divergence guard's rule and its saved form (divergence_guard.h).
#include "divergence_guard.h"

#include <cmath>
#include <cstdio>

namespace tessera::server {
namespace {

constexpr std::string_view kStateName = "state";
constexpr std::size_t kStateValues = 5;
// Versions are stored as f32: exact below 2^24.
constexpr double kMaxStoredVersion = 1 << 24;

std::string figure(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.4g", value);
    return text;
}

}  // namespace

GuardVerdict DivergenceGuard::observe(std::int64_t version, double loss, bool* best) {
    if (best) *best = false;
    GuardVerdict verdict;
    verdict.version = version;
    verdict.loss = loss;
    if (version < state_.from_version) return verdict;
    auto& s = state_;
    if (std::isfinite(loss) && loss < s.best_loss) {
        s.best_loss = loss;
        s.best_version = version;
        s.strikes = 0;
        if (best) *best = true;
        return verdict;
    }
    verdict.best_loss = s.best_loss;
    verdict.best_version = s.best_version;
    if (!std::isfinite(loss)) {
        verdict.reason = "non-finite loss";
    } else if (loss > kFactor * s.best_loss) {
        if (++s.strikes < kConsecutive) return verdict;
        verdict.reason = "loss " + figure(loss) + " > " + figure(kFactor) + " x the best " + figure(s.best_loss) +
                         " (version " + std::to_string(s.best_version) + "), " + std::to_string(s.strikes) +
                         " evaluations without coming back within " + figure(kRecovered) + " x";
    } else {
        if (loss <= kRecovered * s.best_loss) s.strikes = 0;
        return verdict;
    }
    verdict.action = s.recoveries < kMaxRecoveries ? GuardAction::Recover : GuardAction::Pause;
    return verdict;
}

void DivergenceGuard::returned(std::int64_t version, GuardAction action) {
    state_.strikes = 0;
    state_.from_version = version;
    if (action == GuardAction::Recover) {
        ++state_.recoveries;
        state_.lr_scale *= kLrCut;
    }
}

common::NamedTensors DivergenceGuard::to_tensors() const {
    if (!acted()) return {};
    const auto& s = state_;
    common::NamedTensor t{std::string(kGuardPrefix) + std::string(kStateName), {static_cast<std::int64_t>(kStateValues)},
                          {static_cast<float>(s.best_loss), static_cast<float>(s.best_version),
                           static_cast<float>(s.recoveries), static_cast<float>(s.lr_scale),
                           static_cast<float>(s.from_version)}};
    return {std::move(t)};
}

common::Result<DivergenceGuard> DivergenceGuard::from_tensors(const common::NamedTensors& tensors) {
    if (tensors.empty()) return DivergenceGuard();
    if (tensors.size() != 1 || tensors[0].name != std::string(kGuardPrefix) + std::string(kStateName) ||
        tensors[0].values.size() != kStateValues)
        return common::make_error("divergence guard state: expected one tensor 'guard/state' of " +
                                  std::to_string(kStateValues) + " values");
    const auto& v = tensors[0].values;
    auto whole = [](double x) { return std::isfinite(x) && x >= 0 && x < kMaxStoredVersion && x == std::floor(x); };
    if (!whole(v[1] + 1) || !whole(v[2]) || !whole(v[4]) || !(v[3] > 0 && v[3] <= 1) || !(v[0] >= 0))
        return common::make_error("divergence guard state: values out of range");
    State s;
    s.best_loss = v[0];
    s.best_version = static_cast<std::int64_t>(v[1]);
    s.recoveries = static_cast<std::int64_t>(v[2]);
    s.lr_scale = v[3];
    s.from_version = static_cast<std::int64_t>(v[4]);
    return DivergenceGuard(s);
}

}  // namespace tessera::server
