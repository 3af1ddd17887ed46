// The routed sampler against its documented formula (docs/experts.md): the routing weights of
// each rule on hand-made logits, the Euler sum on hand-made experts whose velocity is a constant,
// the single-expert case equal to that expert's own sampler, guidance included, and the class's
// and the caption's evidence computed by hand.
#include <torch/torch.h>

#include <cmath>

#include "doctest_after_torch.h"
#include "torch/expert_sampling.h"
#include "torch/workload.h"

using namespace tessera::common;

namespace {

bool close(const torch::Tensor& a, const torch::Tensor& b, double tolerance = 1e-6) {
    return a.sizes() == b.sizes() && torch::allclose(a, b, tolerance, tolerance);
}

// A dit-tiny (dit-nano-text with `text_dim`) whose velocity is `value` everywhere: a zero output
// layer with a constant bias.
std::unique_ptr<Workload> constant_expert(float value, std::int64_t text_dim = 0) {
    auto workload =
        make_workload(text_dim > 0 ? "dit-nano-text" : "dit-tiny", DataShape{4, 8, 10, text_dim}, 1).value();
    torch::NoGradGuard no_grad;
    auto parameters = workload->module()->named_parameters();
    parameters["out.weight"].zero_();
    parameters["out.bias"].fill_(value);
    return workload;
}

// A router over two experts whose logits are `logits` whatever it is shown.
std::unique_ptr<Workload> constant_router(std::vector<float> logits) {
    auto workload = make_workload("router", DataShape{4, 8, static_cast<std::int64_t>(logits.size()), 0}, 1).value();
    torch::NoGradGuard no_grad;
    auto parameters = workload->module()->named_parameters();
    parameters["router_head.weight"].zero_();
    parameters["router_head.bias"].copy_(torch::tensor(logits));
    return workload;
}

}  // namespace

TEST_CASE("routing weights: the largest, the two largest renormalised, or the whole softmax") {
    auto logits = torch::log(torch::tensor({{0.5f, 0.3f, 0.2f}, {0.1f, 0.2f, 0.7f}}));
    CHECK(close(routing_weights(logits, RoutingRule::All), torch::tensor({{0.5f, 0.3f, 0.2f}, {0.1f, 0.2f, 0.7f}})));
    CHECK(close(routing_weights(logits, RoutingRule::Top1), torch::tensor({{1.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 1.0f}})));
    CHECK(close(routing_weights(logits, RoutingRule::Top2),
                torch::tensor({{0.625f, 0.375f, 0.0f}, {0.0f, 2.0f / 9, 7.0f / 9}})));
    auto ties = torch::zeros({1, 3});  // equal weights: the lower indices
    CHECK(close(routing_weights(ties, RoutingRule::Top1), torch::tensor({{1.0f, 0.0f, 0.0f}})));
    CHECK(close(routing_weights(ties, RoutingRule::Top2), torch::tensor({{0.5f, 0.5f, 0.0f}})));
    CHECK(close(routing_weights(torch::zeros({2, 1}), RoutingRule::Top2), torch::ones({2, 1})));
    CHECK(routing_rule_from_name("top2").value() == RoutingRule::Top2);
    CHECK(routing_rule_from_name("mean").error().message.find("top1, top2 or all") != std::string::npos);
}

TEST_CASE("experts of constant velocity: the sample is the noise less the routed sum of their velocities") {
    auto e0 = constant_expert(0.4f), e1 = constant_expert(-1.0f), e2 = constant_expert(2.0f);
    std::vector<Dit*> experts{dit_of(*e0), dit_of(*e1), dit_of(*e2)};
    auto router = constant_router({std::log(0.5f), std::log(0.3f), std::log(0.2f)});
    DitCondition labels{torch::arange(6, torch::kInt64) % 10, {}, {}};
    SampleOptions options;
    options.steps = 7;
    options.guidance = 3.0;
    auto noise = sampling_noise((*experts[0])->config(), 6, options.seed, torch::kCPU);
    auto sample = [&](RoutingRule rule) {
        return euler_sample_experts(experts, *router_of(*router), labels, options, rule);
    };
    CHECK(close(sample(RoutingRule::All), noise - (0.5 * 0.4 + 0.3 * -1.0 + 0.2 * 2.0), 1e-5));
    CHECK(close(sample(RoutingRule::Top2), noise - (0.625 * 0.4 + 0.375 * -1.0), 1e-5));
    CHECK(close(sample(RoutingRule::Top1), noise - 0.4, 1e-5));
    CHECK_THROWS(
        euler_sample_experts({experts[0], experts[1]}, *router_of(*router), labels, options, RoutingRule::All));
}

TEST_CASE("routed to one expert, the sampler is that expert's own, guidance and all") {
    auto e0 = make_workload("dit-tiny", DataShape{}, 3).value();
    auto e1 = make_workload("dit-tiny", DataShape{}, 4).value();
    for (auto* workload : {e0.get(), e1.get()}) {
        torch::NoGradGuard no_grad;
        workload->module()->named_parameters()["out.weight"].normal_(0, 0.1);  // zero: every velocity 0
    }
    auto router = constant_router({-20.0f, 20.0f});
    DitCondition labels{torch::arange(5, torch::kInt64), {}, {}};
    SampleOptions options;
    options.steps = 5;
    options.guidance = 4.0;
    auto routed =
        euler_sample_experts({dit_of(*e0), dit_of(*e1)}, *router_of(*router), labels, options, RoutingRule::Top1);
    auto alone = euler_sample(*dit_of(*e1), labels, options);
    CHECK(torch::equal(routed, alone));
    CHECK_FALSE(torch::equal(routed, euler_sample(*dit_of(*e0), labels, options)));
}

TEST_CASE("the class's evidence: log p(k | c) / p(k) from the experts' class counts") {
    // Expert 0 holds 30 of class 0 and 10 of class 1; expert 1 only 60 of class 1; class 2 no one.
    auto evidence = class_evidence({{30, 10, 0}, {0, 60, 0}});
    auto expected = torch::tensor({{std::log(1.0f / 0.4f), std::log((10.0f / 70) / 0.4f), 0.0f},
                                   {-INFINITY, std::log((60.0f / 70) / 0.6f), 0.0f}});
    CHECK(evidence.sizes() == torch::IntArrayRef{2, 3});
    CHECK(torch::equal(evidence.isinf(), expected.isinf()));
    auto finite = expected.isfinite();
    CHECK(close(evidence.masked_select(finite), expected.masked_select(finite), 1e-6));
    CHECK_THROWS(class_evidence({{1, 2}, {3}}));
    CHECK(routing_name(routing_from_name("top2-class").value()) == "top2-class");
    CHECK(routing_from_name("top2").value().prior == RoutingPrior::None);
    CHECK(routing_from_name("all-caption").value().prior == RoutingPrior::Caption);
    CHECK(routing_name(routing_from_name("top1-caption").value()) == "top1-caption");
    CHECK(routing_from_name("top3-class").error().message.find("top3-class") != std::string::npos);
}

TEST_CASE("routed by class too: the router's weights times p(k | c) / p(k), renormalised, before the rule") {
    auto e0 = constant_expert(0.4f), e1 = constant_expert(-1.0f);
    std::vector<Dit*> experts{dit_of(*e0), dit_of(*e1)};
    auto router = constant_router({std::log(0.8f), std::log(0.2f)});  // the router prefers expert 0
    // Class 0 only in expert 1, class 2 only in expert 0; class 1 in both as p(k): no evidence.
    auto evidence = class_evidence({{0, 50, 50}, {50, 50, 0}});
    DitCondition labels{torch::tensor({0, 1}, torch::kInt64), {}, {}};
    SampleOptions options;
    options.steps = 3;
    auto noise = sampling_noise((*experts[0])->config(), 2, options.seed, torch::kCPU);
    auto sample = [&](RoutingRule rule) {
        return euler_sample_experts(experts, *router_of(*router), labels, options, rule, evidence);
    };
    for (auto rule : {RoutingRule::All, RoutingRule::Top1}) {
        auto routed = sample(rule);
        CHECK(close(routed[0], noise[0] + 1.0, 1e-5));  // class 0: expert 1 alone, whatever the rule
        auto second = rule == RoutingRule::All ? noise[1] - (0.8 * 0.4 + 0.2 * -1.0) : noise[1] - 0.4;
        CHECK(close(routed[1], second, 1e-5));  // class 1: the router's weights as they were
    }
}

TEST_CASE("the pooled caption: the mean of each row's own tokens, padding left out") {
    auto text =
        torch::tensor({{{1.0f, 2.0f}, {3.0f, 4.0f}, {100.0f, 100.0f}}, {{2.0f, 0.0f}, {4.0f, 2.0f}, {6.0f, 4.0f}}});
    auto pooled = pooled_captions(text, torch::tensor({2, 3}, torch::kInt64));
    CHECK(close(pooled, torch::tensor({{2.0f, 3.0f}, {4.0f, 2.0f}})));
    CHECK(close(pooled_captions(text, {}), text.mean(1)));
}

TEST_CASE("the caption's evidence: log p(k | e) / p(k) under the clusters read as a Gaussian mixture") {
    // Two centres on a line, 30 and 10 samples, inertia 40 over N · D = 40 · 2 values: σ² = 0.5.
    std::vector<std::vector<double>> centres{{0.0, 0.0}, {2.0, 0.0}};
    std::vector<std::int64_t> sizes{30, 10};
    auto pooled = torch::tensor({{0.0f, 0.0f}, {1.0f, 0.0f}, {2.0f, 1.0f}});
    auto evidence = caption_evidence(centres, sizes, 40.0, pooled);
    auto expected = torch::empty({3, 2});
    for (int row = 0; row < 3; ++row) {
        double joint[2], total = 0;
        for (int k = 0; k < 2; ++k) {
            auto dx = pooled[row][0].item<double>() - centres[k][0], dy = pooled[row][1].item<double>() - centres[k][1];
            joint[k] = (sizes[k] / 40.0) * std::exp(-(dx * dx + dy * dy) / (2 * 0.5));
            total += joint[k];
        }
        for (int k = 0; k < 2; ++k) expected[row][k] = std::log(joint[k] / total / (sizes[k] / 40.0));
    }
    CHECK(close(evidence, expected, 1e-5));
    // Midway between the centres the distance says nothing: the evidence is 0 for both.
    CHECK(close(evidence[1], torch::zeros({2}), 1e-6));
    CHECK(evidence[0][0].item<float>() > 0);
    CHECK(evidence[2][1].item<float>() > 0);
    CHECK_THROWS(caption_evidence(centres, {30, 0}, 40.0, pooled));
    CHECK_THROWS(caption_evidence(centres, sizes, 0.0, pooled));
    CHECK_THROWS(caption_evidence({{0.0}, {1.0}}, sizes, 40.0, pooled));
}

TEST_CASE("routed by caption too: each row's evidence added to the router's logits before the rule") {
    constexpr std::int64_t kTextDim = 64;
    auto e0 = constant_expert(0.4f, kTextDim), e1 = constant_expert(-1.0f, kTextDim);
    std::vector<Dit*> experts{dit_of(*e0), dit_of(*e1)};
    auto router = constant_router({std::log(0.8f), std::log(0.2f)});  // the router prefers expert 0
    DitCondition captions{{}, torch::randn({3, 5, kTextDim}), torch::tensor({5, 3, 1}, torch::kInt64)};
    // Row 0 belongs to expert 1 beyond doubt, row 1 says nothing, row 2 leans 3:1 to expert 1.
    auto evidence = torch::tensor({{-INFINITY, 0.0f}, {0.0f, 0.0f}, {std::log(0.25f), std::log(0.75f)}});
    SampleOptions options;
    options.steps = 3;
    auto noise = sampling_noise((*experts[0])->config(), 3, options.seed, torch::kCPU);
    auto routed = euler_sample_experts(experts, *router_of(*router), captions, options, RoutingRule::All, evidence);
    CHECK(close(routed[0], noise[0] + 1.0, 1e-5));
    CHECK(close(routed[1], noise[1] - (0.8 * 0.4 + 0.2 * -1.0), 1e-5));
    // 0.8 · 0.25 against 0.2 · 0.75: 4 : 3 for expert 0.
    CHECK(close(routed[2], noise[2] - (4.0 / 7 * 0.4 + 3.0 / 7 * -1.0), 1e-5));
    CHECK_THROWS(euler_sample_experts(experts, *router_of(*router), captions, options, RoutingRule::All,
                                      evidence.slice(0, 0, 2)));
}
