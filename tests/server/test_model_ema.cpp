// The EMA of the versions: its warm-up, its update, and its place beside the policy's state
// in a checkpoint's state file.
#include <doctest/doctest.h>

#include "model_ema.h"

using namespace tessera;
using namespace tessera::server;

namespace {

common::NamedTensors model_of(float a, float b) { return {{"bias", {2}, {a, b}}, {"weight", {1}, {a + b}}}; }

}  // namespace

TEST_CASE("the decay warms up as (1 + v) / (10 + v) until it reaches the task's") {
    CHECK(ema_decay_at(0.999, 1) == doctest::Approx(2.0 / 11.0));
    CHECK(ema_decay_at(0.999, 90) == doctest::Approx(91.0 / 100.0));
    CHECK(ema_decay_at(0.999, 100000) == doctest::Approx(0.999));
    CHECK(ema_decay_at(0.5, 20) == doctest::Approx(0.5));
}

TEST_CASE("an update moves the average towards the model by 1 - d") {
    auto ema = model_of(0, 0);
    REQUIRE(ema_update(ema, model_of(1, 2), 0.75).ok());
    CHECK(ema[0].values == std::vector<float>{0.25f, 0.5f});
    CHECK(ema[1].values == std::vector<float>{0.75f});
    REQUIRE(ema_update(ema, model_of(1, 2), 0.75).ok());
    CHECK(ema[0].values[0] == doctest::Approx(0.4375));

    common::NamedTensors other{{"bias", {3}, {0, 0, 0}}, {"weight", {1}, {0}}};
    auto refused = ema_update(ema, other, 0.5);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("ema") != std::string::npos);
    CHECK(ema[0].values[0] == doctest::Approx(0.4375));  // left as it was
}

TEST_CASE("the EMA rides in the state file beside the policy's tensors and splits back out") {
    common::NamedTensors policy{{"momentum/bias", {2}, {5, 6}}, {"pending_count", {1}, {1}}};
    auto saved = with_ema(policy, model_of(3, 4));
    CHECK(saved.size() == 4);
    CHECK(saved[2].name == "ema/bias");
    auto split = split_saved_state(saved);
    REQUIRE(split.policy.size() == 2);
    CHECK(split.policy[0].name == "momentum/bias");
    REQUIRE(split.ema.size() == 2);
    CHECK(split.ema[0].name == "bias");
    CHECK(split.ema[1].values == std::vector<float>{7});
    CHECK(split_saved_state(policy).ema.empty());  // a checkpoint from before EMAs
}
