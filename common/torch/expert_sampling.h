// Sampling decentralized experts as one model (docs/experts.md, "Sampling as one model"): at
// each Euler step the router's softmax p(x_t, t) over the E experts weighs their guided
// velocities, v = Σ_k w_k · (v_k,u + g·(v_k,c − v_k,u)), where w is p itself (`all`), p's two
// largest entries renormalised to sum to 1 (`top2`), or 1 for p's largest (`top1`). An expert
// whose weight is 0 for every row is not run; one that is runs on its weighted rows only.
// Routing by class too (`top2-class`, …): the class's evidence log(p(k | c) / p(k)) is added to the
// router's logits before the rule, so p becomes p(k | x_t, t, c) ∝ p(k | x_t, t) · p(k | c) / p(k)
// (x_t and c taken as independent given the expert), and an expert that never saw class c is
// never asked for it.
#pragma once

#include <string_view>
#include <vector>

#include "../result.h"
#include "models/dit.h"
#include "models/router.h"
#include "rectified_flow.h"

namespace tessera::common {

enum class RoutingRule { Top1, Top2, All };

std::string_view routing_rule_name(RoutingRule rule);
Result<RoutingRule> routing_rule_from_name(std::string_view name);

// A rule, and whether the class routes too: named "top2" or "top2-class".
struct Routing {
    RoutingRule rule = RoutingRule::Top2;
    bool by_class = false;
};
std::string routing_name(Routing routing);
Result<Routing> routing_from_name(std::string_view name);

// log(p(k | c) / p(k)) (E, C), f32, from each expert's training samples per class (E × C):
// −∞ where expert k holds no sample of c; 0 for a class no expert holds (the router alone).
torch::Tensor class_evidence(const std::vector<std::vector<std::int64_t>>& class_counts);

// The routing weights (B, E), rows summing to 1, from the router's logits (B, E) under `rule`
// (top2 with E = 1 is top1). Ties go to the lower expert index.
torch::Tensor routing_weights(const torch::Tensor& logits, RoutingRule rule);

// Latents (B, C, S, S) for a condition of B rows, on the condition's device, from the experts
// (all of one shape and conditioning) through the router, with the Euler steps, guidance and
// starting noise of euler_sample: with one expert, or top1 routing that always picks the same
// expert, the result is that expert's euler_sample. `evidence` (E, C) from class_evidence, when
// defined, is added to the logits of each row by its label.
torch::Tensor euler_sample_experts(const std::vector<Dit*>& experts, Router& router, const DitCondition& condition,
                                   const SampleOptions& options, RoutingRule rule, const torch::Tensor& evidence = {});

}  // namespace tessera::common
