// Merging that scales with the fleet: delayed Nesterov (diloco-dn) against synchronous
// DiLoCo's outer step, its state across a restart, fedasync divided by the concurrency, and
// staleness measured in concurrencies (`conc`).
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "merge_policy.h"
#include "staleness.h"

using namespace tessera::common;
using namespace tessera::server;

namespace {

// A model of two tensors, "a" [3] and "b" [2, 2], filled from `rng`.
NamedTensors random_tensors(std::mt19937& rng, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    NamedTensors t{{"a", {3}, std::vector<float>(3)}, {"b", {2, 2}, std::vector<float>(4)}};
    for (auto& tensor : t)
        for (auto& v : tensor.values) v = normal(rng);
    return t;
}

std::unique_ptr<MergePolicy> make(const MergeSettings& settings) {
    auto policy = make_merge_policy(settings);
    REQUIRE_MESSAGE(policy.ok(), policy.message());
    return std::move(policy.value());
}

MergeOutcome add_ok(MergePolicy& policy, NamedTensors& model, IncomingDelta in) {
    auto outcome = policy.add(model, std::move(in));
    REQUIRE_MESSAGE(outcome.ok(), outcome.message());
    return outcome.value();
}

double max_abs(const NamedTensors& t) {
    double m = 0;
    for (const auto& tensor : t)
        for (float v : tensor.values) m = std::max(m, std::abs(static_cast<double>(v)));
    return m;
}

// max |x − y| over all coordinates; the layouts are the same.
double max_difference(const NamedTensors& x, const NamedTensors& y) {
    double m = 0;
    for (std::size_t t = 0; t < x.size(); ++t)
        for (std::size_t j = 0; j < x[t].values.size(); ++j)
            m = std::max(m, std::abs(static_cast<double>(x[t].values[j]) - y[t].values[j]));
    return m;
}

MergeSettings dn_settings(std::int64_t period) {
    MergeSettings s;
    s.kind = PolicyKind::DiLoCoDN;
    s.server_lr = 0.7;
    s.momentum = 0.9;
    s.buffer_size = period;
    return s;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("diloco-dn: every N-th arrival leaves the model synchronous DiLoCo's outer step gives") {
    // Five rounds of four pseudo-gradients on one base each: after each fourth arrival the
    // delayed-Nesterov model equals DiLoCo's with a buffer of four (Liu et al., Algorithm 3).
    std::mt19937 rng(7);
    MergeSettings sync = dn_settings(4);
    sync.kind = PolicyKind::DiLoCo;
    auto dn = make(dn_settings(4));
    auto diloco = make(sync);
    NamedTensors model_dn = random_tensors(rng, 1.0f), model_sync = model_dn;
    for (int round = 0; round < 5; ++round) {
        const NamedTensors base = model_dn;
        for (int i = 0; i < 4; ++i) {
            auto delta = random_tensors(rng, 0.1f);
            auto outcome = add_ok(*dn, model_dn, {"r" + std::to_string(round) + "-" + std::to_string(i), i, delta});
            CHECK(outcome.model_changed);  // every arrival is a new version
            add_ok(*diloco, model_sync, {"s" + std::to_string(i), 0, delta});
        }
        CHECK(max_difference(model_dn, base) > 0);
        CAPTURE(round);
        CHECK(max_difference(model_dn, model_sync) <= 1e-6 * std::max(1.0, max_abs(model_sync)));
    }
    CHECK(dn->pending_ids().empty());
}

TEST_CASE("diloco-dn: between momentum steps each arrival moves θ by ε·s·Δ/N") {
    auto dn = make(dn_settings(4));
    NamedTensors model{{"w", {2}, {1.0f, -2.0f}}};
    add_ok(*dn, model, {"first", 0, {{"w", {2}, {0.4f, 0.8f}}}});
    CHECK(model[0].values[0] == doctest::Approx(1.0 + 0.7 * 0.4 / 4));
    CHECK(model[0].values[1] == doctest::Approx(-2.0 + 0.7 * 0.8 / 4));
    // The fourth arrival also takes the momentum step: m = β·0 + mean(g), θ −= ε·β·m.
    for (int i = 0; i < 3; ++i) add_ok(*dn, model, {"more" + std::to_string(i), 0, {{"w", {2}, {0.4f, 0.8f}}}});
    const double g0 = -0.4, g1 = -0.8;
    CHECK(model[0].values[0] == doctest::Approx(1.0 - 0.7 * g0 - 0.7 * 0.9 * g0));
    CHECK(model[0].values[1] == doctest::Approx(-2.0 - 0.7 * g1 - 0.7 * 0.9 * g1));
}

TEST_CASE("diloco-dn: N = 1 is DiLoCo with a buffer of one") {
    std::mt19937 rng(3);
    MergeSettings sync = dn_settings(1);
    sync.kind = PolicyKind::DiLoCo;
    auto dn = make(dn_settings(1));
    auto diloco = make(sync);
    NamedTensors a = random_tensors(rng, 1.0f), b = a;
    for (int i = 0; i < 6; ++i) {
        auto delta = random_tensors(rng, 0.1f);
        add_ok(*dn, a, {"d" + std::to_string(i), 0, delta});
        add_ok(*diloco, b, {"s" + std::to_string(i), 0, delta});
    }
    CHECK(max_difference(a, b) <= 1e-6 * std::max(1.0, max_abs(b)));
}

TEST_CASE("diloco-dn: state saved mid-period and loaded continues bit for bit") {
    std::mt19937 rng(11);
    NamedTensors start = random_tensors(rng, 1.0f);
    std::vector<NamedTensors> deltas;
    for (int i = 0; i < 10; ++i) deltas.push_back(random_tensors(rng, 0.1f));

    auto uninterrupted = make(dn_settings(4));
    NamedTensors expected = start;
    for (int i = 0; i < 10; ++i) add_ok(*uninterrupted, expected, {"u" + std::to_string(i), i % 3, deltas[i]});

    // Six arrivals (one momentum step, two gathered), a restart, then the other four.
    auto first = make(dn_settings(4));
    NamedTensors model = start;
    for (int i = 0; i < 6; ++i) add_ok(*first, model, {"f" + std::to_string(i), i % 3, deltas[i]});
    const NamedTensors state = first->optimizer_state();
    REQUIRE(state.size() == 2 * model.size() + 1);
    CHECK(state.back().name == "pending_count");
    CHECK(state.back().values == std::vector<float>{2.0f});
    auto second = make(dn_settings(4));
    auto loaded = second->load_optimizer_state(state, model);
    REQUIRE_MESSAGE(loaded.ok(), loaded.message());
    for (int i = 6; i < 10; ++i) add_ok(*second, model, {"s" + std::to_string(i), i % 3, deltas[i]});
    for (std::size_t t = 0; t < model.size(); ++t) CHECK(model[t].values == expected[t].values);
    CHECK(second->optimizer_state().back().values == uninterrupted->optimizer_state().back().values);
}

TEST_CASE("diloco-dn: a fresh policy has no state; a bad state is refused and changes nothing") {
    auto dn = make(dn_settings(4));
    NamedTensors model{{"w", {2}, {1.0f, 2.0f}}};
    CHECK(dn->optimizer_state().empty());
    CHECK(dn->load_optimizer_state({}, model).ok());

    NamedTensors good{{"momentum/w", {2}, {0.1f, 0.2f}}, {"pending/w", {2}, {0.0f, 0.0f}}, {"pending_count", {1}, {0.0f}}};
    SUBCASE("missing tensor") {
        NamedTensors bad(good.begin(), good.begin() + 2);
        auto status = dn->load_optimizer_state(bad, model);
        CHECK(!status.ok());
        CHECK(contains(status.message(), "expected 3 tensors"));
    }
    SUBCASE("wrong shape") {
        auto bad = good;
        bad[1].shape = {1, 2};
        auto status = dn->load_optimizer_state(bad, model);
        CHECK(!status.ok());
        CHECK(contains(status.message(), "diloco-dn pending"));
    }
    SUBCASE("non-finite momentum") {
        auto bad = good;
        bad[0].values[1] = std::nanf("");
        auto status = dn->load_optimizer_state(bad, model);
        CHECK(!status.ok());
        CHECK(contains(status.message(), "non-finite"));
    }
    SUBCASE("a count that is not a whole number") {
        auto bad = good;
        bad[2].values[0] = 1.5f;
        auto status = dn->load_optimizer_state(bad, model);
        CHECK(!status.ok());
        CHECK(contains(status.message(), "pending_count"));
    }
    // None of the refusals changed the state: the next arrival acts on a fresh policy.
    add_ok(*dn, model, {"after", 0, {{"w", {2}, {0.4f, 0.4f}}}});
    CHECK(model[0].values[0] == doctest::Approx(1.0 + 0.7 * 0.4 / 4));
}

TEST_CASE("diloco-dn: a delta of another layout is refused and changes nothing") {
    auto dn = make(dn_settings(2));
    NamedTensors model{{"w", {2}, {1.0f, 2.0f}}};
    add_ok(*dn, model, {"ok", 0, {{"w", {2}, {0.1f, 0.1f}}}});
    const NamedTensors before = model;
    const NamedTensors state_before = dn->optimizer_state();
    auto refused = dn->add(model, {"bad", 0, {{"v", {2}, {1.0f, 1.0f}}}});
    CHECK(!refused.ok());
    CHECK(contains(refused.message(), "bad"));
    CHECK(model[0].values == before[0].values);
    for (std::size_t t = 0; t < state_before.size(); ++t)
        CHECK(dn->optimizer_state()[t].values == state_before[t].values);
}

TEST_CASE("fedasync per concurrency: θ ← θ + η·s·Δ/C, which is diloco-dn without momentum") {
    MergeSettings fedasync;
    fedasync.kind = PolicyKind::FedAsync;
    fedasync.server_lr = 0.7;
    fedasync.concurrency_exponent = 1;
    auto divided = make(fedasync);
    MergeSettings dn = dn_settings(4);
    dn.momentum = 0;
    auto no_momentum = make(dn);
    std::mt19937 rng(5);
    NamedTensors a = random_tensors(rng, 1.0f), b = a;
    for (int i = 0; i < 8; ++i) {
        auto delta = random_tensors(rng, 0.1f);
        IncomingDelta in{"d" + std::to_string(i), 0, delta, 4};
        add_ok(*divided, a, in);
        add_ok(*no_momentum, b, {"n" + std::to_string(i), 0, delta, 4});
    }
    CHECK(max_difference(a, b) <= 1e-6 * std::max(1.0, max_abs(b)));

    // Without the division the concurrency does not change fedasync's step; with the exponent
    // ¾ the step is η·C^-¾ (η = C^¼ with the division); beyond [0, 2] the setting is refused.
    fedasync.concurrency_exponent = 0;
    auto plain = make(fedasync);
    NamedTensors model{{"w", {1}, {0.0f}}};
    add_ok(*plain, model, {"x", 0, {{"w", {1}, {1.0f}}}, 8});
    CHECK(model[0].values[0] == doctest::Approx(0.7));
    fedasync.concurrency_exponent = 0.75;
    auto quarter = make(fedasync);
    NamedTensors scaled{{"w", {1}, {0.0f}}};
    add_ok(*quarter, scaled, {"x", 0, {{"w", {1}, {1.0f}}}, 16});
    CHECK(scaled[0].values[0] == doctest::Approx(0.7 * std::pow(16.0, -0.75)));
    fedasync.concurrency_exponent = 2.5;
    auto refused = make_merge_policy(fedasync);
    REQUIRE_FALSE(refused);
    CHECK(refused.message() == "concurrency_exponent must be in [0, 2], got 2.5");
}

TEST_CASE("conc staleness: full weight up to M·C_v, then (M·C_v/τ)^A; refused beyond R·C_v") {
    auto parsed = parse_staleness("conc:1,1,2");
    REQUIRE_MESSAGE(parsed.ok(), parsed.message());
    const Staleness s = *parsed;
    for (std::int64_t tau = 0; tau <= 8; ++tau) CHECK(s.weight(tau, 8) == 1.0);
    CHECK(s.weight(16, 8) == doctest::Approx(0.5));
    CHECK(s.weight(16, 1) == doctest::Approx(1.0 / 16));
    CHECK(!s.too_stale(16, 8));
    CHECK(s.too_stale(17, 8));
    CHECK(!parse_staleness("conc:1,1")->too_stale(1000000, 1));  // R omitted: never refused
    // A concurrency below one counts as one.
    CHECK(s.weight(1, 0) == 1.0);
    CHECK(s.weight(2, 0) == doctest::Approx(0.5));
    // The other kinds ignore the concurrency and never refuse.
    Staleness poly{Staleness::Kind::Polynomial, 0.5, 0};
    CHECK(poly.weight(3, 64) == doctest::Approx(0.5));
    CHECK(!poly.too_stale(1000000, 1));
}

TEST_CASE("conc staleness: text form round-trips and bad forms are named") {
    for (const char* text : {"conc:1,1", "conc:2,0.5,4", "conc:0.5,0"}) {
        auto parsed = parse_staleness(text);
        REQUIRE_MESSAGE(parsed.ok(), parsed.message());
        CHECK(parsed->to_string() == text);
        CHECK(validate_staleness(*parsed).ok());
    }
    const std::vector<std::pair<const char*, const char*>> bad = {
        {"conc:0,1", "M must be > 0"},          {"conc:1,-1", "A must be >= 0"},
        {"conc:2,1,1", "R must be 0"},          {"conc:1", "two or three numbers"},
        {"conc:1,1,4,5", "two or three numbers"}, {"conc:1,x", "finite numbers"},
        {"conc:", "finite numbers"},
    };
    for (const auto& [text, why] : bad) {
        auto parsed = parse_staleness(text);
        CAPTURE(text);
        REQUIRE(!parsed.ok());
        CHECK(contains(parsed.message(), why));
        CHECK(contains(parsed.message(), "conc:M,A[,R]"));
    }
    Staleness invalid{Staleness::Kind::Concurrency, 1, 0, 0};
    CHECK(!validate_staleness(invalid).ok());
}

TEST_CASE("fedbuff and diloco measure staleness in concurrencies of their buffer") {
    // C = 8 volunteers, a buffer of 4: C_v = 2 versions, so τ = 2 keeps full weight and τ = 4
    // gets (2/4)^1.
    MergeSettings settings;
    settings.kind = PolicyKind::FedBuff;
    settings.buffer_size = 1;
    settings.staleness = *parse_staleness("conc:1,1");
    auto one = make(settings);
    NamedTensors model{{"w", {1}, {0.0f}}};
    add_ok(*one, model, {"a", 4, {{"w", {1}, {1.0f}}}, 8});  // buffer 1: C_v = 8, full weight
    CHECK(model[0].values[0] == doctest::Approx(1.0));
    settings.buffer_size = 4;
    auto four = make(settings);
    NamedTensors m4{{"w", {1}, {0.0f}}};
    for (int i = 0; i < 3; ++i) add_ok(*four, m4, {"p" + std::to_string(i), 2, {{"w", {1}, {1.0f}}}, 8});
    add_ok(*four, m4, {"q", 4, {{"w", {1}, {1.0f}}}, 8});
    CHECK(m4[0].values[0] == doctest::Approx((1.0 + 1.0 + 1.0 + 0.5) / 4));
}
