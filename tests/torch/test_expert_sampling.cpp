// The routed sampler against its documented formula (docs/experts.md): the routing weights of
// each rule on hand-made logits, the Euler sum on hand-made experts whose velocity is a constant,
// and the single-expert case equal to that expert's own sampler, guidance included.
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

// A dit-tiny whose velocity is `value` everywhere: a zero output layer with a constant bias.
std::unique_ptr<Workload> constant_expert(float value) {
    auto workload = make_workload("dit-tiny", DataShape{}, 1).value();
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
