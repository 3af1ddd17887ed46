// Merge math: staleness weights, tensor norms and layout checks, and the fedasync, fedbuff
// and diloco policies against small hand-computed cases.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "merge_policy.h"
#include "staleness.h"
#include "tensor_math.h"

using namespace tessera::common;
using namespace tessera::server;

namespace {

// A model-shaped pair of tensors: "w" of shape [2] and "b" of shape [1].
NamedTensors wb(float w0, float w1, float b) { return {{"w", {2}, {w0, w1}}, {"b", {1}, {b}}}; }

// A single tensor "w" of shape [2].
NamedTensors w2(float w0, float w1) { return {{"w", {2}, {w0, w1}}}; }

void check_values(const NamedTensors& tensors, const std::vector<double>& expected) {
    std::vector<float> flat;
    for (const auto& t : tensors) flat.insert(flat.end(), t.values.begin(), t.values.end());
    REQUIRE(flat.size() == expected.size());
    for (std::size_t i = 0; i < flat.size(); ++i) {
        CAPTURE(i);
        CHECK(flat[i] == doctest::Approx(expected[i]));
    }
}

std::unique_ptr<MergePolicy> make(const MergeSettings& settings) {
    auto policy = make_merge_policy(settings);
    REQUIRE_MESSAGE(policy.ok(), policy.message());
    return std::move(policy.value());
}

MergeOutcome add_ok(MergePolicy& policy, NamedTensors& model, std::string id, std::int64_t tau, NamedTensors delta) {
    auto outcome = policy.add(model, {std::move(id), tau, std::move(delta)});
    REQUIRE_MESSAGE(outcome.ok(), outcome.message());
    return outcome.value();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("staleness weights") {
    SUBCASE("constant is 1 at any staleness") {
        Staleness s;
        CHECK(s.weight(0) == 1.0);
        CHECK(s.weight(1000) == 1.0);
    }
    SUBCASE("polynomial (1+τ)^−a") {
        Staleness s{Staleness::Kind::Polynomial, 0.5, 0};
        CHECK(s.weight(0) == doctest::Approx(1.0));
        CHECK(s.weight(3) == doctest::Approx(0.5));        // 4^−0.5
        CHECK(s.weight(8) == doctest::Approx(1.0 / 3.0));  // 9^−0.5
        CHECK(s.weight(-5) == doctest::Approx(1.0));       // negative τ counts as 0
        Staleness linear{Staleness::Kind::Polynomial, 1, 0};
        CHECK(linear.weight(1) == doctest::Approx(0.5));
        CHECK(linear.weight(4) == doctest::Approx(0.2));
    }
    SUBCASE("hinge: 1 up to b, then 1/(a(τ−b)+1)") {
        Staleness s{Staleness::Kind::Hinge, 10, 4};
        CHECK(s.weight(0) == 1.0);
        CHECK(s.weight(4) == 1.0);
        CHECK(s.weight(5) == doctest::Approx(1.0 / 11.0));  // 10·1 + 1
        CHECK(s.weight(6) == doctest::Approx(1.0 / 21.0));  // 10·2 + 1
        Staleness gentle{Staleness::Kind::Hinge, 0.5, 2};
        CHECK(gentle.weight(6) == doctest::Approx(1.0 / 3.0));  // 0.5·4 + 1
        CHECK(gentle.weight(-1) == 1.0);
    }
}

TEST_CASE("staleness text form round-trips") {
    CHECK(Staleness{}.to_string() == "const");
    CHECK(Staleness{Staleness::Kind::Polynomial, 0.5, 0}.to_string() == "poly:0.5");
    CHECK(Staleness{Staleness::Kind::Hinge, 10, 4}.to_string() == "hinge:10,4");

    for (const Staleness& s : {Staleness{}, Staleness{Staleness::Kind::Polynomial, 0.1, 0},
                               Staleness{Staleness::Kind::Hinge, 0.3, 7}, Staleness{Staleness::Kind::Hinge, 0, 0}}) {
        auto parsed = parse_staleness(s.to_string());
        REQUIRE_MESSAGE(parsed.ok(), parsed.message());
        CHECK(parsed->kind == s.kind);
        CHECK(parsed->a == s.a);  // exact: the text is the shortest round-tripping form
        CHECK(parsed->b == s.b);
    }
    auto hinge = parse_staleness("hinge:2.5,10");
    REQUIRE(hinge.ok());
    CHECK(hinge->kind == Staleness::Kind::Hinge);
    CHECK(hinge->a == 2.5);
    CHECK(hinge->b == 10);
}

TEST_CASE("parse_staleness errors name the text and the accepted forms") {
    for (const char* bad : {"", "constant", "const:1", "poly", "poly:", "poly:0", "poly:-1", "poly:abc", "poly:1x",
                            "poly:inf", "poly:nan", "hinge:1", "hinge:1,", "hinge:1,2,3", "hinge:-1,2", "hinge:1,-2",
                            "hinge:nan,1", "linear:1", " poly:1"}) {
        CAPTURE(bad);
        auto parsed = parse_staleness(bad);
        REQUIRE_FALSE(parsed.ok());
        CHECK(contains(parsed.message(), "'" + std::string(bad) + "'"));
        CHECK(contains(parsed.message(), "const, poly:A"));
        CHECK(contains(parsed.message(), "hinge:A,B"));
    }
}

TEST_CASE("l2_norm and relative_l2") {
    CHECK(l2_norm({}) == 0.0);
    CHECK(l2_norm(wb(3, 4, 12)) == doctest::Approx(13.0));  // √(9 + 16 + 144)

    auto full = relative_l2(w2(3, 4), w2(0, 0));  // ‖(3,4)‖ / max(5, 0)
    REQUIRE(full.ok());
    CHECK(*full == doctest::Approx(1.0));
    auto part = relative_l2(w2(3, 4), w2(3, 0));  // ‖(0,4)‖ / max(5, 3)
    REQUIRE(part.ok());
    CHECK(*part == doctest::Approx(0.8));
    auto zeros = relative_l2(w2(0, 0), w2(0, 0));  // 0 / 1e-12
    REQUIRE(zeros.ok());
    CHECK(*zeros == 0.0);

    auto mismatch = relative_l2(w2(3, 4), wb(3, 4, 0));
    REQUIRE_FALSE(mismatch.ok());
    CHECK(mismatch.message() == "unexpected tensor 'b'");
}

TEST_CASE("check_same_layout names the first difference") {
    auto message = [](const NamedTensors& model, const NamedTensors& other) {
        auto status = check_same_layout(model, other);
        return status.ok() ? std::string("ok") : status.message();
    };
    const NamedTensor x32{"x", {3, 2}, std::vector<float>(6)};
    const NamedTensor x23{"x", {2, 3}, std::vector<float>(6)};
    const NamedTensor a{"a", {1}, {1}};
    const NamedTensor b{"b", {1}, {1}};
    const NamedTensor y{"y", {1}, {1}};
    const NamedTensor z{"z", {1}, {1}};

    CHECK(message({a, x32}, {a, x32}) == "ok");
    CHECK(message({}, {}) == "ok");
    CHECK(message({x32}, {x23}) == "tensor 'x': shape [2,3] differs from the model's [3,2]");
    CHECK(message({NamedTensor{"s", {}, {1}}}, {NamedTensor{"s", {1}, {1}}}) ==
          "tensor 's': shape [1] differs from the model's []");
    CHECK(message({a, y}, {a}) == "missing tensor 'y'");
    CHECK(message({a, y, b}, {a, b}) == "missing tensor 'y'");
    CHECK(message({a}, {a, z}) == "unexpected tensor 'z'");
    CHECK(message({a, b}, {a, z, b}) == "unexpected tensor 'z'");
    CHECK(message({a, b}, {b, a}) == "tensor 'b' is out of order: the model has 'a' at position 0");
    CHECK(message({NamedTensor{"v", {2}, {1, 2}}}, {NamedTensor{"v", {2}, {1, 2, 3}}}) ==
          "tensor 'v': 3 values, the model has 2");
}

TEST_CASE("scale and clip") {
    NamedTensors t = wb(1, -2, 0.5f);
    scale_in_place(t, 3);
    check_values(t, {3, -6, 1.5});

    NamedTensors delta = w2(3, 4);  // norm 5
    CHECK(clip_norm_in_place(delta, 10) == 1.0);
    check_values(delta, {3, 4});
    CHECK(clip_norm_in_place(delta, 0) == 1.0);
    check_values(delta, {3, 4});
    CHECK(clip_norm_in_place(delta, 2.5) == doctest::Approx(0.5));
    check_values(delta, {1.5, 2});
    CHECK(l2_norm(delta) == doctest::Approx(2.5));
}

TEST_CASE("policy names") {
    for (auto kind : {PolicyKind::FedAsync, PolicyKind::FedBuff, PolicyKind::DiLoCo, PolicyKind::DiLoCoDN}) {
        auto back = policy_from_name(policy_name(kind));
        REQUIRE(back.has_value());
        CHECK(*back == kind);
    }
    CHECK(policy_name(PolicyKind::DiLoCo) == "diloco");
    CHECK(policy_name(PolicyKind::DiLoCoDN) == "diloco-dn");
    CHECK_FALSE(policy_from_name("FedAsync").has_value());
    CHECK_FALSE(policy_from_name("").has_value());
}

TEST_CASE("validate_settings names the bad field") {
    auto error_of = [](MergeSettings s) {
        auto status = validate_settings(s);
        return status.ok() ? std::string("ok") : status.message();
    };
    CHECK(error_of({}) == "ok");
    MergeSettings s;
    s.server_lr = 0;
    CHECK(error_of(s) == "server_lr must be a finite number > 0, got 0");
    s.server_lr = std::numeric_limits<double>::quiet_NaN();
    CHECK(contains(error_of(s), "server_lr"));
    s = {};
    s.clip_norm = -1;
    CHECK(error_of(s) == "clip_norm must be a finite number >= 0, got -1");
    s = {};
    s.buffer_size = 0;
    CHECK(error_of(s) == "buffer_size must be >= 1, got 0");
    s = {};
    s.trim_fraction = 0.5;
    CHECK(error_of(s) == "trim_fraction must be in [0, 0.5), got 0.5");
    s.trim_fraction = -0.1;
    CHECK(contains(error_of(s), "trim_fraction"));
    s = {};
    s.momentum = 1;
    CHECK(error_of(s) == "momentum must be in [0, 1), got 1");
    s = {};
    s.staleness = {Staleness::Kind::Polynomial, 0, 0};
    CHECK(contains(error_of(s), "poly:0"));
    s.staleness = {Staleness::Kind::Hinge, -1, 2};
    CHECK(contains(error_of(s), "hinge:-1,2"));

    MergeSettings bad;
    bad.kind = PolicyKind::FedBuff;
    bad.buffer_size = -3;
    auto policy = make_merge_policy(bad);
    REQUIRE_FALSE(policy.ok());
    CHECK(contains(policy.message(), "buffer_size"));
}

TEST_CASE("fedasync: θ ← θ + η·s(τ)·Δ on every arrival") {
    SUBCASE("fresh delta") {
        MergeSettings settings;
        settings.server_lr = 0.5;
        auto policy = make(settings);
        NamedTensors model = wb(1, 2, 0.5f);
        auto outcome = add_ok(*policy, model, "r1", 0, wb(2, -4, 1));
        CHECK(outcome.model_changed);
        CHECK(outcome.merged_ids == std::vector<std::string>{"r1"});
        check_values(model, {2, 0, 1});  // (1,2,0.5) + 0.5·(2,−4,1)
        CHECK(policy->pending_ids().empty());
        CHECK(policy->optimizer_state().empty());
    }
    SUBCASE("stale delta weighted by s(3) = 1/4") {
        MergeSettings settings;
        settings.staleness = {Staleness::Kind::Polynomial, 1, 0};
        auto policy = make(settings);
        NamedTensors model = w2(1, 2);
        add_ok(*policy, model, "r1", 3, w2(4, 8));
        check_values(model, {2, 4});  // (1,2) + 0.25·(4,8)
    }
    SUBCASE("clipped before weighting") {
        MergeSettings settings;
        settings.clip_norm = 5;
        settings.staleness = {Staleness::Kind::Hinge, 1, 0};
        auto policy = make(settings);
        NamedTensors model = w2(0, 0);
        add_ok(*policy, model, "r1", 1, w2(6, 8));
        check_values(model, {1.5, 2});  // (6,8) clipped to norm 5 → (3,4), s(1) = 1/(1·1+1) = 1/2
    }
}

TEST_CASE("fedbuff: buffers K deltas, then θ ← θ + η·mean(s_i·Δ_i)") {
    SUBCASE("no change until K, then the mean") {
        MergeSettings settings;
        settings.kind = PolicyKind::FedBuff;
        settings.buffer_size = 3;
        auto policy = make(settings);
        NamedTensors model = w2(1, 1);
        auto first = add_ok(*policy, model, "r1", 0, w2(3, 0));
        CHECK_FALSE(first.model_changed);
        CHECK(first.merged_ids.empty());
        add_ok(*policy, model, "r2", 0, w2(0, 3));
        check_values(model, {1, 1});
        CHECK(policy->pending_ids() == std::vector<std::string>{"r1", "r2"});
        auto third = add_ok(*policy, model, "r3", 0, w2(3, 3));
        CHECK(third.model_changed);
        CHECK(third.merged_ids == std::vector<std::string>{"r1", "r2", "r3"});
        check_values(model, {3, 3});  // (1,1) + (6,6)/3
        CHECK(policy->pending_ids().empty());
    }
    SUBCASE("staleness weights and η") {
        MergeSettings settings;
        settings.kind = PolicyKind::FedBuff;
        settings.buffer_size = 2;
        settings.server_lr = 0.5;
        settings.staleness = {Staleness::Kind::Polynomial, 1, 0};
        auto policy = make(settings);
        NamedTensors model = w2(0, 0);
        add_ok(*policy, model, "old", 1, w2(4, 0));  // s(1) = 1/2 → (2,0)
        add_ok(*policy, model, "new", 0, w2(0, 2));  // s(0) = 1 → (0,2)
        check_values(model, {0.5, 0.5});             // 0.5·((2,0) + (0,2))/2
    }
    SUBCASE("trimmed mean ignores an outlier per coordinate") {
        MergeSettings settings;
        settings.kind = PolicyKind::FedBuff;
        settings.buffer_size = 5;
        settings.trim_fraction = 0.2;  // floor(0.2·5) = 1 dropped from each end
        auto policy = make(settings);
        NamedTensors model = w2(0, 0);
        add_ok(*policy, model, "a", 0, w2(100, 0));
        add_ok(*policy, model, "b", 0, w2(1, 3));
        add_ok(*policy, model, "c", 0, w2(2, -50));
        add_ok(*policy, model, "d", 0, w2(3, 1));
        auto outcome = add_ok(*policy, model, "e", 0, w2(4, 2));
        CHECK(outcome.merged_ids.size() == 5);
        // x: 1 2 3 4 [100] → (2+3+4)/3 = 3; y: [−50] 0 1 2 [3] → (0+1+2)/3 = 1.
        // The plain mean would be (22, −8.8).
        check_values(model, {3, 1});
    }
    SUBCASE("trim of 0.25 with K = 4 drops one from each end") {
        MergeSettings settings;
        settings.kind = PolicyKind::FedBuff;
        settings.buffer_size = 4;
        settings.trim_fraction = 0.25;
        settings.server_lr = 2;
        auto policy = make(settings);
        NamedTensors model = w2(1, 0);
        for (auto [id, x] : std::vector<std::pair<std::string, float>>{{"a", -10}, {"b", 1}, {"c", 2}, {"d", 10}})
            add_ok(*policy, model, id, 0, w2(x, x));
        check_values(model, {4, 3});  // (1,0) + 2·(1+2)/2
    }
}

TEST_CASE("diloco: outer Nesterov on pseudo-gradients") {
    SUBCASE("N = 1: two outer steps with momentum") {
        MergeSettings settings;
        settings.kind = PolicyKind::DiLoCo;
        settings.server_lr = 0.7;
        settings.momentum = 0.9;
        auto policy = make(settings);
        NamedTensors model = w2(1, 2);
        CHECK(policy->optimizer_state().empty());
        // g = (−0.5, 1); m = g; θ −= 0.7·(g + 0.9·g) = 1.33·g → (1.665, 0.67).
        auto first = add_ok(*policy, model, "r1", 0, w2(0.5f, -1));
        CHECK(first.model_changed);
        CHECK(first.merged_ids == std::vector<std::string>{"r1"});
        check_values(model, {1.665, 0.67});
        check_values(policy->optimizer_state(), {-0.5, 1});
        // g = (−1, 0); m = 0.9·(−0.5, 1) + g = (−1.45, 0.9);
        // θ −= 0.7·(g + 0.9·m) = 0.7·(−2.305, 0.81) → (3.2785, 0.103).
        add_ok(*policy, model, "r2", 0, w2(1, 0));
        check_values(model, {3.2785, 0.103});
        auto state = policy->optimizer_state();
        REQUIRE(state.size() == 1);
        CHECK(state[0].name == "w");
        CHECK(state[0].shape == std::vector<std::int64_t>{2});
        check_values(state, {-1.45, 0.9});
    }
    SUBCASE("N = 2 with staleness weights") {
        MergeSettings settings;
        settings.kind = PolicyKind::DiLoCo;
        settings.buffer_size = 2;
        settings.server_lr = 0.5;
        settings.momentum = 0.5;
        settings.staleness = {Staleness::Kind::Polynomial, 1, 0};
        auto policy = make(settings);
        NamedTensors model = w2(0, 0);
        CHECK_FALSE(add_ok(*policy, model, "a", 1, w2(2, 0)).model_changed);  // g = −(1/2)·(2,0) = (−1,0)
        check_values(model, {0, 0});
        CHECK(policy->pending_ids() == std::vector<std::string>{"a"});
        // g = (0,−4); ḡ = (−0.5,−2); m = ḡ; θ −= 0.5·1.5·ḡ → (0.375, 1.5).
        auto step = add_ok(*policy, model, "b", 0, w2(0, 4));
        CHECK(step.merged_ids == std::vector<std::string>{"a", "b"});
        check_values(model, {0.375, 1.5});
        // g = (−1,−1), (−3,1); ḡ = (−2,0); m = 0.5·(−0.5,−2) + ḡ = (−2.25,−1);
        // θ −= 0.5·(ḡ + 0.5·m) = 0.5·(−3.125,−0.5) → (1.9375, 1.75).
        add_ok(*policy, model, "c", 0, w2(1, 1));
        check_values(model, {0.375, 1.5});
        add_ok(*policy, model, "d", 0, w2(3, -1));
        check_values(model, {1.9375, 1.75});
        check_values(policy->optimizer_state(), {-2.25, -1});
    }
}

TEST_CASE("a bad delta is refused and changes nothing") {
    for (auto kind : {PolicyKind::FedAsync, PolicyKind::FedBuff, PolicyKind::DiLoCo}) {
        CAPTURE(policy_name(kind));
        MergeSettings settings;
        settings.kind = kind;
        settings.buffer_size = kind == PolicyKind::FedAsync ? 1 : 2;
        settings.momentum = 0;
        auto policy = make(settings);
        NamedTensors model = wb(1, 2, 3);
        if (kind != PolicyKind::FedAsync) add_ok(*policy, model, "good", 0, wb(2, 2, 2));

        auto wrong_shape = policy->add(model, {"bad", 0, {{"w", {1, 2}, {5, 5}}, {"b", {1}, {5}}}});
        REQUIRE_FALSE(wrong_shape.ok());
        CHECK(wrong_shape.message() == "delta 'bad': tensor 'w': shape [1,2] differs from the model's [2]");
        auto missing = policy->add(model, {"short", 0, w2(5, 5)});
        REQUIRE_FALSE(missing.ok());
        CHECK(missing.message() == "delta 'short': missing tensor 'b'");
        auto nan = policy->add(model, {"nan", 0, wb(std::numeric_limits<float>::quiet_NaN(), 0, 0)});
        REQUIRE_FALSE(nan.ok());
        CHECK(nan.message() == "delta 'nan': non-finite values");
        check_values(model, {1, 2, 3});

        // The buffer still holds only "good": one more delta completes the step.
        auto outcome = add_ok(*policy, model, "last", 0, wb(4, 0, 2));
        CHECK(outcome.model_changed);
        if (kind == PolicyKind::FedAsync) {
            check_values(model, {5, 2, 5});
        } else {
            CHECK(outcome.merged_ids == std::vector<std::string>{"good", "last"});
            // Mean delta (3,1,2); fedbuff adds it, diloco with μ = 0 and η = 1 too.
            check_values(model, {4, 3, 5});
        }
    }
}

TEST_CASE("diloco momentum saved and loaded continues like an uninterrupted run") {
    MergeSettings settings;
    settings.kind = PolicyKind::DiLoCo;
    settings.server_lr = 0.7;
    settings.momentum = 0.9;
    const std::vector<NamedTensors> deltas = {wb(0.5f, -1, 0.25f), wb(1, 0, -0.5f), wb(-0.25f, 0.75f, 1)};

    auto straight = make(settings);
    NamedTensors straight_model = wb(1, 2, 3);
    for (std::size_t i = 0; i < deltas.size(); ++i) add_ok(*straight, straight_model, std::to_string(i), 0, deltas[i]);

    auto before = make(settings);
    NamedTensors model = wb(1, 2, 3);
    add_ok(*before, model, "0", 0, deltas[0]);
    add_ok(*before, model, "1", 0, deltas[1]);
    const NamedTensors saved_state = before->optimizer_state();
    const NamedTensors saved_model = model;

    auto restarted = make(settings);
    NamedTensors resumed_model = saved_model;
    auto loaded = restarted->load_optimizer_state(saved_state, resumed_model);
    REQUIRE_MESSAGE(loaded.ok(), loaded.message());
    add_ok(*restarted, resumed_model, "2", 0, deltas[2]);
    for (std::size_t t = 0; t < resumed_model.size(); ++t)
        for (std::size_t j = 0; j < resumed_model[t].values.size(); ++j)
            CHECK(resumed_model[t].values[j] == straight_model[t].values[j]);
    CHECK(l2_norm(restarted->optimizer_state()) == l2_norm(straight->optimizer_state()));

    // Without the momentum the third step differs: m would restart at zero.
    auto forgetful = make(settings);
    NamedTensors forgetful_model = saved_model;
    add_ok(*forgetful, forgetful_model, "2", 0, deltas[2]);
    auto distance = relative_l2(forgetful_model, straight_model);
    REQUIRE(distance.ok());
    CHECK(*distance > 0.01);

    SUBCASE("empty state means fresh momentum") {
        REQUIRE(restarted->load_optimizer_state({}, resumed_model).ok());
        CHECK(restarted->optimizer_state().empty());
    }
    SUBCASE("state with the wrong layout is refused") {
        auto wrong = restarted->load_optimizer_state(w2(1, 1), resumed_model);
        REQUIRE_FALSE(wrong.ok());
        CHECK(wrong.message() == "diloco momentum: missing tensor 'b'");
        CHECK(l2_norm(restarted->optimizer_state()) == l2_norm(straight->optimizer_state()));
    }
    SUBCASE("non-finite state is refused") {
        auto bad = restarted->load_optimizer_state(wb(std::numeric_limits<float>::infinity(), 0, 0), resumed_model);
        REQUIRE_FALSE(bad.ok());
        CHECK(contains(bad.message(), "non-finite"));
    }
    SUBCASE("fedasync and fedbuff keep no state") {
        for (auto kind : {PolicyKind::FedAsync, PolicyKind::FedBuff}) {
            MergeSettings other;
            other.kind = kind;
            auto policy = make(other);
            CHECK(policy->load_optimizer_state({}, model).ok());
            auto refused = policy->load_optimizer_state(saved_state, model);
            REQUIRE_FALSE(refused.ok());
            CHECK(refused.message() == std::string(policy_name(kind)) + " keeps no optimizer state, got 2 tensors");
        }
    }
}
