// Sampling decentralized experts as one model (docs/experts.md, "Sampling as one model"): at
// each Euler step the router's softmax p(x_t, t) over the E experts weighs their guided
// velocities, v = Σ_k w_k · (v_k,u + g·(v_k,c − v_k,u)), where w is p itself (`all`), p's two
// largest entries renormalised to sum to 1 (`top2`), or 1 for p's largest (`top1`). An expert
// whose weight is 0 for every row is not run; one that is runs on its weighted rows only.
// Routing by the condition too (`top2-class`, `top2-caption`, …): its evidence log(p(k | c) / p(k))
// is added to the router's logits before the rule, so p becomes p(k | x_t, t, c) ∝ p(k | x_t, t) ·
// p(k | c) / p(k) (x_t and c taken as independent given the expert). For a class, p(k | c) comes
// from the experts' class counts, so an expert that never saw class c is never asked for it; for a
// caption, from the clusters read as a mixture of Gaussians on the pooled caption embedding.
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

// What routes beside the router: nothing, the class, or the caption.
enum class RoutingPrior { None, Class, Caption };

// A rule, and what routes too: named "top2", "top2-class" or "top2-caption".
struct Routing {
    RoutingRule rule = RoutingRule::Top2;
    RoutingPrior prior = RoutingPrior::None;
};
std::string routing_name(Routing routing);
Result<Routing> routing_from_name(std::string_view name);

// log(p(k | c) / p(k)) (E, C), f32, from each expert's training samples per class (E × C):
// −∞ where expert k holds no sample of c; 0 for a class no expert holds (the router alone).
torch::Tensor class_evidence(const std::vector<std::vector<std::int64_t>>& class_counts);

// The pooled caption embedding (B, D): each row's first text_len tokens of `text` (B, L, D)
// averaged, as `tessera-data cluster --features text` pools them; all L where text_len is undefined.
torch::Tensor pooled_captions(const torch::Tensor& text, const torch::Tensor& text_len);

// log(p(k | e) / p(k)) (B, E), f32, for pooled captions e (B, D) under the k-means clusters read
// as a mixture of E Gaussians: centres c_k (E × D), weights p(k) = n_k / N from the clusters'
// sizes, one isotropic variance σ² = inertia / (N · D) (k-means' mean squared distance per
// dimension): log p(k | e) = log p(k) − ‖e − c_k‖² / 2σ² − log Σ_j p(j) exp(−‖e − c_j‖² / 2σ²).
torch::Tensor caption_evidence(const std::vector<std::vector<double>>& centres, const std::vector<std::int64_t>& sizes,
                               double inertia, const torch::Tensor& pooled);

// The routing weights (B, E), rows summing to 1, from the router's logits (B, E) under `rule`
// (top2 with E = 1 is top1). Ties go to the lower expert index.
torch::Tensor routing_weights(const torch::Tensor& logits, RoutingRule rule);

// Latents (B, C, S, S) for a condition of B rows, on the condition's device, from the experts
// (all of one shape and conditioning) through the router, with the Euler steps, guidance and
// starting noise of euler_sample: with one expert, or top1 routing that always picks the same
// expert, the result is that expert's euler_sample. `evidence`, when defined, is added to the
// router's logits: for a class condition (E, C) from class_evidence, by each row's label; for a
// text condition (B, E) from caption_evidence, row by row.
torch::Tensor euler_sample_experts(const std::vector<Dit*>& experts, Router& router, const DitCondition& condition,
                                   const SampleOptions& options, RoutingRule rule, const torch::Tensor& evidence = {});

}  // namespace tessera::common
