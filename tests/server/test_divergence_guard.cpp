// The divergence guard's rule on loss curves the fleet simulator measured (honest runs never
// trip it, diverging ones do), its bounded recoveries and saved state; and diloco's refusal of
// an outer step that diverges on late pseudo-gradients, checked against the iteration it models.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "divergence_guard.h"
#include "merge_policy.h"

using namespace tessera::server;

namespace {

// Feeds a curve (versions 0, 1, …) and returns the verdicts.
std::vector<GuardVerdict> feed(DivergenceGuard& guard, const std::vector<double>& losses) {
    std::vector<GuardVerdict> verdicts;
    for (std::size_t v = 0; v < losses.size(); ++v) verdicts.push_back(guard.observe(static_cast<std::int64_t>(v), losses[v]));
    return verdicts;
}

std::size_t first_action(const std::vector<GuardVerdict>& verdicts) {
    for (std::size_t i = 0; i < verdicts.size(); ++i)
        if (verdicts[i].action != GuardAction::None) return i;
    return verdicts.size();
}

// The scalar model behind max_delayed_outer_step: the outer Nesterov step on pseudo-gradients
// one step late, g_k = c·x_{k−1}; true when |x| has shrunk after many steps.
bool delayed_nesterov_converges(double c, double mu) {
    double x = 1, previous = 1, m = 0;
    for (int k = 0; k < 20000; ++k) {
        const double g = c * previous;
        m = mu * m + g;
        previous = x;
        x = x - (g + mu * m);
        if (std::abs(x) > 1e6) return false;
    }
    return std::abs(x) < 1e-3;
}

}  // namespace

TEST_CASE("the fleet simulator's honest curves never trip the guard") {
    // docs/benchmarks.md: the campaign's curves at K = 8 (curve points), and a run that
    // wobbles by 5 % around a plateau.
    const std::vector<std::vector<double>> honest = {
        {2.0015, 1.52, 1.49, 1.12, 0.83, 0.71, 0.64, 0.58, 0.55, 0.52, 0.50},
        {2.11, 1.07, 0.97, 1.02, 0.93, 0.88, 0.80, 0.74, 0.69, 0.66},
        {1.75, 1.45, 1.38, 1.30, 1.21, 1.16, 1.10, 1.16, 1.05, 1.08},
        {0.40, 0.42, 0.39, 0.41, 0.40, 0.42, 0.38, 0.40, 0.41, 0.39}};
    for (const auto& curve : honest) {
        DivergenceGuard guard;
        auto verdicts = feed(guard, curve);
        CHECK(first_action(verdicts) == verdicts.size());
        CHECK(guard.state().recoveries == 0);
    }
}

TEST_CASE("a diverging curve trips the guard on its second evaluation above 1.5x the best") {
    // diloco at η 0.7, μ 0.9 on the home fleet, K = 8 (docs/benchmarks.md, "Divergence guard").
    DivergenceGuard guard;
    auto verdicts = feed(guard, {2.0015, 1.086, 3.750, 3.853, 8.019});
    REQUIRE(first_action(verdicts) == 3);
    const auto& trip = verdicts[3];
    CHECK(trip.action == GuardAction::Recover);
    CHECK(trip.best_version == 1);
    CHECK(trip.best_loss == doctest::Approx(1.086));
    CHECK(trip.reason.find("2 evaluations") != std::string::npos);
}

TEST_CASE("an oscillating curve trips the guard; an honest spike that falls back does not") {
    // diloco η 0.25, μ 0.9 (within the delayed-step limit, yet two outer steps late too often):
    // 2.37, then 1.25 (1.48x: not back within 1.2x), then 1.96.
    DivergenceGuard oscillating;
    auto verdicts = feed(oscillating, {2.0015, 1.4721, 1.02138, 0.842926, 2.37126, 1.24967, 1.96313});
    CHECK(first_action(verdicts) == 6);
    // fedbuff's stale unit at version 5 (2.3x for one evaluation), then below the best.
    DivergenceGuard honest;
    CHECK(first_action(feed(honest, {2.0015, 1.26168, 0.755875, 0.878097, 1.72732, 0.648548, 0.64596, 1.3, 0.7,
                                     1.3})) == 10);
}

TEST_CASE("one spike is tolerated, a non-finite loss is not") {
    DivergenceGuard spike;
    CHECK(first_action(feed(spike, {2.0, 1.4, 0.82, 2.0, 0.74, 0.74})) == 6);  // diloco η 0.5, μ 0.5
    DivergenceGuard back;  // a spike, a loss within 1.2x the best, another spike: no trip
    CHECK(first_action(feed(back, {2.0, 1.0, 1.6, 1.1, 1.7, 0.9})) == 6);
    DivergenceGuard nan;
    auto verdicts = feed(nan, {2.0, 1.0, std::numeric_limits<double>::quiet_NaN()});
    REQUIRE(first_action(verdicts) == 2);
    CHECK(verdicts[2].reason == "non-finite loss");
    DivergenceGuard inf;
    CHECK(first_action(feed(inf, {2.0, std::numeric_limits<double>::infinity()})) == 1);
}

TEST_CASE("recoveries halve the rate up to the bound, then the guard pauses") {
    DivergenceGuard guard;
    CHECK(guard.observe(0, 1.0).action == GuardAction::None);
    std::int64_t version = 1;
    for (std::int64_t round = 0; round <= DivergenceGuard::kMaxRecoveries; ++round) {
        CHECK(guard.observe(version++, 2.0).action == GuardAction::None);
        auto verdict = guard.observe(version++, 2.0);
        const bool last = round == DivergenceGuard::kMaxRecoveries;
        CHECK(verdict.action == (last ? GuardAction::Pause : GuardAction::Recover));
        guard.returned(version, verdict.action);
        // A late evaluation of a version from before the return is ignored.
        CHECK(guard.observe(version - 1, 50.0).action == GuardAction::None);
        CHECK(guard.state().strikes == 0);
    }
    CHECK(guard.state().recoveries == DivergenceGuard::kMaxRecoveries);
    CHECK(guard.state().lr_scale == doctest::Approx(0.125));
}

TEST_CASE("the guard's state is saved once it has acted, and read back") {
    DivergenceGuard fresh;
    CHECK(fresh.to_tensors().empty());
    feed(fresh, {1.0, 0.8, 2.0, 2.0});
    fresh.returned(5, GuardAction::Recover);
    auto saved = fresh.to_tensors();
    REQUIRE(saved.size() == 1);
    CHECK(saved[0].name == "guard/state");
    auto back = DivergenceGuard::from_tensors(saved);
    REQUIRE(back.ok());
    CHECK(back->state().lr_scale == doctest::Approx(0.5));
    CHECK(back->state().recoveries == 1);
    CHECK(back->state().best_version == 1);
    CHECK(back->state().best_loss == doctest::Approx(0.8));
    CHECK(back->state().from_version == 5);
    CHECK(DivergenceGuard::from_tensors({}).value().state().recoveries == 0);

    auto bad = saved;
    bad[0].values[3] = 2;  // a learning-rate scale above 1
    CHECK_FALSE(DivergenceGuard::from_tensors(bad).ok());
    bad = saved;
    bad[0].values.pop_back();
    CHECK_FALSE(DivergenceGuard::from_tensors(bad).ok());
}

TEST_CASE("the delayed outer step's limit is where the late-gradient iteration stops converging") {
    CHECK(max_delayed_outer_step(0) == doctest::Approx(1.0));
    CHECK(max_delayed_outer_step(0.5) == doctest::Approx(0.5616).epsilon(1e-3));
    CHECK(max_delayed_outer_step(0.9) == doctest::Approx(0.2531).epsilon(1e-3));
    for (double mu : {0.0, 0.3, 0.5, 0.7, 0.9, 0.95}) {
        CAPTURE(mu);
        const double limit = max_delayed_outer_step(mu);
        CHECK(delayed_nesterov_converges(0.97 * limit, mu));
        CHECK_FALSE(delayed_nesterov_converges(1.03 * limit, mu));
    }
}

TEST_CASE("diloco's old defaults are refused with the safe range; the new ones and other policies pass") {
    MergeSettings old;
    old.kind = PolicyKind::DiLoCo;
    old.server_lr = 0.7;
    old.momentum = 0.9;
    old.buffer_size = 4;
    old.staleness = {Staleness::Kind::Polynomial, 0.5, 0};
    auto refused = check_async_stability(old);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("server_lr 0.7 with momentum 0.9 diverges") != std::string::npos);
    CHECK(refused.message().find("server_lr <= 0.358") != std::string::npos);  // 0.2531 / (1+1)^-0.5

    auto fedasync = old;
    fedasync.kind = PolicyKind::FedAsync;
    CHECK(check_async_stability(fedasync).ok());
    auto fedbuff_like = old;  // η 1 without momentum: fedbuff's step, at the limit's edge
    fedbuff_like.server_lr = 1;
    fedbuff_like.momentum = 0;
    fedbuff_like.staleness = {};
    CHECK(check_async_stability(fedbuff_like).ok());
    fedbuff_like.server_lr = 1.2;
    CHECK_FALSE(check_async_stability(fedbuff_like).ok());
}
