// The inner optimizer kept from one work unit to the next: AdamW's moments taken out and put
// back, a unit resumed from the last one's moments, and the run's learning-rate schedule.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "doctest_after_torch.h"
#include "lr_schedule.h"
#include "torch/adamw.h"
#include "torch/trainer.h"
#include "trainer_fixtures.h"

using namespace tessera::common;
using tessera::testing::apply_delta;
using tessera::testing::first_shard_and_weights;

TEST_CASE("MultiTensorAdamW's moments taken out and put back continue bit for bit") {
    torch::manual_seed(5);
    std::vector<torch::Tensor> start{torch::randn({4, 3}), torch::randn({3})};
    std::vector<std::vector<torch::Tensor>> grads;
    for (int step = 0; step < 6; ++step) grads.push_back({torch::randn({4, 3}), torch::randn({3})});
    auto run = [&](std::vector<torch::Tensor> params, MultiTensorAdamW& optimizer, int from, int to) {
        for (int step = from; step < to; ++step) {
            optimizer.zero_grad();
            for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = grads[step][i].clone();
            optimizer.step(1e-2);
        }
    };
    std::vector<torch::Tensor> straight, first;
    for (const auto& p : start) {
        straight.push_back(p.clone().set_requires_grad(true));
        first.push_back(p.clone().set_requires_grad(true));
    }
    MultiTensorAdamW uninterrupted(straight, 0.01);
    run(straight, uninterrupted, 0, 6);

    MultiTensorAdamW before(first, 0.01);
    run(first, before, 0, 3);
    auto moments = before.moments();
    REQUIRE(moments.size() == 2);
    CHECK(moments[0].steps == 3);
    std::vector<torch::Tensor> second;
    for (const auto& p : first) second.push_back(p.detach().clone().set_requires_grad(true));
    MultiTensorAdamW after(second, 0.01);
    REQUIRE(after.load_moments(moments).ok());
    run(second, after, 3, 6);
    for (std::size_t i = 0; i < second.size(); ++i) CHECK(torch::equal(second[i], straight[i]));
    // The moments handed in were copied: the continued run left them as they were.
    CHECK(torch::equal(moments[0].exp_avg, before.moments()[0].exp_avg));

    // Moments of another shape are refused and change nothing.
    auto wrong = moments;
    wrong[1].exp_avg = torch::zeros({4});
    auto refused = after.load_moments(wrong);
    REQUIRE(!refused.ok());
    CHECK(refused.message().find("parameter 1") != std::string::npos);
    CHECK(after.moments()[1].steps == 6);
}

TEST_CASE("update clipping shrinks a step whose gradient outgrew the kept second moment, and only that") {
    // One step from moments that saw gradients of 1e-2 while the new gradient is 1 (a model
    // the server moved); the other tensor's gradient is as its moments expect.
    auto step_from = [](bool clipping) {
        std::vector<torch::Tensor> params{torch::zeros({8}).set_requires_grad(true),
                                          torch::zeros({8}).set_requires_grad(true)};
        MultiTensorAdamW optimizer(params, 0.0);
        optimizer.set_update_clipping(clipping);
        std::vector<AdamWMoments> kept(2);
        for (auto& m : kept) {
            m.exp_avg = torch::full({8}, 1e-2);
            m.exp_avg_sq = torch::full({8}, 1e-4);
            m.steps = 5000;  // bias corrections ≈ 1
        }
        REQUIRE(optimizer.load_moments(kept).ok());
        params[0].mutable_grad() = torch::ones({8});
        params[1].mutable_grad() = torch::full({8}, 1e-2);
        optimizer.step(1e-3);
        return std::vector<double>{-params[0][0].item<double>(), -params[1][0].item<double>()};
    };
    auto plain = step_from(false);
    auto clipped = step_from(true);
    // v = 0.999e-4 + 0.001 = 1.0999e-3: RMS(g²/v̂) = 1/√1.0999e-3 ≈ 30.2 for the first tensor.
    const double rms = 1.0 / std::sqrt((0.999e-4 + 1e-3) / (1 - std::pow(0.999, 5001)));
    CHECK(plain[0] > 2 * 1e-3);  // the stale moment lets the step grow past the learning rate
    CHECK(clipped[0] == doctest::Approx(plain[0] / rms).epsilon(1e-4));
    CHECK(clipped[1] == doctest::Approx(plain[1]).epsilon(1e-6));  // RMS below 1: unchanged
}

TEST_CASE("a unit that keeps the inner optimizer starts from the last unit's moments and returns its own") {
    auto [data, theta0] = first_shard_and_weights();
    TrainConfig config;
    config.steps = 4;
    config.batch_size = 16;
    config.seed = 7;
    config.return_optimizer = true;
    auto first = train("dit-tiny", theta0, data, config).value();
    REQUIRE(!first.optimizer.empty());
    CHECK(first.optimizer.steps == 4);
    CHECK(first.optimizer.exp_avg.size() == theta0.size());
    CHECK(first.optimizer.exp_avg_sq.size() == theta0.size());

    auto theta1 = apply_delta(theta0, first.delta);
    config.seed = 8;
    auto fresh = train("dit-tiny", theta1, data, config).value();
    CHECK(fresh.optimizer.steps == 4);
    config.resume_optimizer = &first.optimizer;
    auto kept = train("dit-tiny", theta1, data, config).value();
    CHECK(kept.optimizer.steps == 8);
    CHECK_FALSE(torch::equal(kept.delta.at("blocks.0.qkv.weight"), fresh.delta.at("blocks.0.qkv.weight")));
    // Resuming twice from the same state gives the same unit: the state handed in is not changed.
    auto again = train("dit-tiny", theta1, data, config).value();
    for (const auto& [name, delta] : kept.delta) CHECK(torch::equal(delta, again.delta.at(name)));

    SUBCASE("a state of another model is a clear error") {
        auto other = first.optimizer;
        other.exp_avg.erase(other.exp_avg.begin());
        config.resume_optimizer = &other;
        auto refused = train("dit-tiny", theta1, data, config);
        REQUIRE(!refused.ok());
        CHECK(refused.message().find("no moments for parameter") != std::string::npos);
    }
}

TEST_CASE("a unit's learning rate follows the task's schedule over the span it covers") {
    auto [data, theta0] = first_shard_and_weights();
    TrainConfig config;
    config.steps = 6;
    config.batch_size = 16;
    config.lr = 1e-3;
    config.warmup_steps = 5;  // fresh moments: the per-unit warm-up applies under the schedule too
    config.schedule = LrSchedule{LrSchedule::Kind::Cosine, 1000, 100000, 0.1};
    config.schedule_from = 600;
    config.schedule_to = 60600;
    // A signed unit's fields reach the trainer unchanged.
    Hyperparameters hyper{.local_steps = 6, .batch_size = 16, .lr = 1e-3, .warmup_steps = 5};
    hyper.schedule = config.schedule;
    hyper.schedule_from = 600;
    hyper.schedule_to = 60600;
    auto from_unit = train_config_for(hyper);
    CHECK(from_unit.schedule == config.schedule);
    CHECK(from_unit.schedule_from == 600);
    CHECK(from_unit.schedule_to == 60600);
    std::vector<double> seen;
    config.on_lr = [&](std::int64_t step, double lr) {
        CHECK(step == static_cast<std::int64_t>(seen.size()));
        seen.push_back(lr);
    };
    REQUIRE(train("dit-tiny", theta0, data, config).ok());
    REQUIRE(seen.size() == 6);
    for (std::int64_t s = 0; s < 6; ++s)
        CHECK(seen[s] == doctest::Approx(1e-3 * lr_factor(*config.schedule, 600 + 10000.0 * s, 16) *
                                         std::min(1.0, (s + 1) / 5.0)));
    CHECK(seen[0] < seen[1]);

    // Resumed kept moments (the client sets no per-unit warm-up): the schedule alone.
    config.warmup_steps = 0;
    seen.clear();
    REQUIRE(train("dit-tiny", theta0, data, config).ok());
    REQUIRE(seen.size() == 6);
    for (std::int64_t s = 0; s < 6; ++s)
        CHECK(seen[s] == doctest::Approx(1e-3 * lr_factor(*config.schedule, 600 + 10000.0 * s, 16)));
    CHECK(seen[0] < seen[1]);  // still warming up at 600 + 16 of 1000 samples
    CHECK(seen[5] < seen[2]);  // decaying
    config.warmup_steps = 5;

    // Without a schedule: the per-unit warm-up.
    config.schedule.reset();
    seen.clear();
    REQUIRE(train("dit-tiny", theta0, data, config).ok());
    REQUIRE(seen.size() == 6);
    CHECK(seen[0] == doctest::Approx(1e-3 / 5));
    CHECK(seen[5] == doctest::Approx(1e-3));
}
