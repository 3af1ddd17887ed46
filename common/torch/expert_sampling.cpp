// The routed Euler sampler of decentralized experts.
#include "expert_sampling.h"

#include <torch/torch.h>

#include <cmath>

namespace tessera::common {
namespace {

// Rows `index` (i64) of every tensor of the condition.
DitCondition rows_of(const DitCondition& condition, const torch::Tensor& index) {
    auto pick = [&](const torch::Tensor& t) { return t.defined() ? t.index_select(0, index) : t; };
    return {pick(condition.labels), pick(condition.text), pick(condition.text_len)};
}

std::string_view prior_suffix(RoutingPrior prior) {
    switch (prior) {
        case RoutingPrior::Class: return "-class";
        case RoutingPrior::Caption: return "-caption";
        case RoutingPrior::None: return "";
    }
    return "";
}

}  // namespace

std::string_view routing_rule_name(RoutingRule rule) {
    switch (rule) {
        case RoutingRule::Top1: return "top1";
        case RoutingRule::Top2: return "top2";
        case RoutingRule::All: return "all";
    }
    return "all";
}

Result<RoutingRule> routing_rule_from_name(std::string_view name) {
    for (auto rule : {RoutingRule::Top1, RoutingRule::Top2, RoutingRule::All})
        if (routing_rule_name(rule) == name) return rule;
    return make_error("routing must be top1, top2 or all, not \"" + std::string(name) + "\"");
}

std::string routing_name(Routing routing) {
    return std::string(routing_rule_name(routing.rule)) + std::string(prior_suffix(routing.prior));
}

Result<Routing> routing_from_name(std::string_view name) {
    Routing routing;
    auto rule_name = name;
    for (auto prior : {RoutingPrior::Class, RoutingPrior::Caption})
        if (name.ends_with(prior_suffix(prior))) {
            routing.prior = prior;
            rule_name.remove_suffix(prior_suffix(prior).size());
        }
    auto rule = routing_rule_from_name(rule_name);
    if (!rule)
        return make_error(
            "routing must be top1, top2 or all, with -class or -caption to route by the condition too, not \"" +
            std::string(name) + "\"");
    routing.rule = *rule;
    return routing;
}

torch::Tensor class_evidence(const std::vector<std::vector<std::int64_t>>& class_counts) {
    TORCH_CHECK(!class_counts.empty() && !class_counts.front().empty(), "class counts need experts and classes");
    auto experts = static_cast<std::int64_t>(class_counts.size());
    auto classes = static_cast<std::int64_t>(class_counts.front().size());
    auto counts = torch::zeros({experts, classes}, torch::kFloat64);
    for (std::int64_t k = 0; k < experts; ++k) {
        TORCH_CHECK(static_cast<std::int64_t>(class_counts[k].size()) == classes, "ragged class counts");
        for (std::int64_t c = 0; c < classes; ++c) counts[k][c] = static_cast<double>(class_counts[k][c]);
    }
    auto per_class = counts.sum(0, true);                          // (1, C)
    auto prior = counts.sum(1, true) / counts.sum().clamp_min(1);  // p(k), (E, 1)
    auto given_class = counts / per_class.clamp_min(1);            // p(k | c)
    auto evidence = (given_class / prior).log();                   // −∞ where n_kc = 0
    return torch::where(per_class.expand_as(evidence) > 0, evidence, torch::zeros_like(evidence)).to(torch::kFloat32);
}

torch::Tensor pooled_captions(const torch::Tensor& text, const torch::Tensor& text_len) {
    auto tokens = text.to(torch::kFloat32);
    if (!text_len.defined()) return tokens.mean(1);
    auto length = text_len.to(tokens.device()).to(torch::kFloat32).clamp_min(1);
    auto kept = torch::arange(tokens.size(1), tokens.options()).view({1, -1}) < length.view({-1, 1});  // (B, L)
    return (tokens * kept.unsqueeze(2).to(tokens.dtype())).sum(1) / length.view({-1, 1});
}

torch::Tensor caption_evidence(const std::vector<std::vector<double>>& centres, const std::vector<std::int64_t>& sizes,
                               double inertia, const torch::Tensor& pooled) {
    TORCH_CHECK(!centres.empty() && centres.size() == sizes.size(), "caption evidence needs a size per centre");
    auto experts = static_cast<std::int64_t>(centres.size()), dim = pooled.size(1);
    auto c = torch::empty({experts, dim}, torch::kFloat64);
    std::int64_t total = 0;
    for (std::int64_t k = 0; k < experts; ++k) {
        TORCH_CHECK(static_cast<std::int64_t>(centres[k].size()) == dim, "centre ", k, " has ", centres[k].size(),
                    " values, the captions ", dim);
        for (std::int64_t d = 0; d < dim; ++d) c[k][d] = centres[k][d];
        TORCH_CHECK(sizes[k] > 0, "cluster ", k, " is empty");
        total += sizes[k];
    }
    auto variance = inertia / static_cast<double>(total * dim);
    TORCH_CHECK(std::isfinite(variance) && variance > 0, "the clusters' inertia gives no variance");
    auto e = pooled.to(torch::kFloat64).cpu();
    auto prior = torch::tensor(std::vector<double>(sizes.begin(), sizes.end()), torch::kFloat64) / total;
    auto joint = prior.log().view({1, -1}) - torch::cdist(e, c).square() / (2 * variance);  // (B, E)
    auto posterior = joint - joint.logsumexp(1, true);
    return (posterior - prior.log().view({1, -1})).to(torch::kFloat32).to(pooled.device());
}

torch::Tensor routing_weights(const torch::Tensor& logits, RoutingRule rule) {
    auto p = torch::softmax(logits.to(torch::kFloat32), 1);
    if (rule == RoutingRule::All) return p;
    auto keep = std::min<std::int64_t>(rule == RoutingRule::Top1 ? 1 : 2, p.size(1));
    // topk of the stable sort's order: among equal weights the lower index first.
    auto order = std::get<1>(p.sort(/*stable=*/true, 1, /*descending=*/true)).slice(1, 0, keep);
    auto kept = torch::zeros_like(p).scatter(1, order, p.gather(1, order));
    return kept / kept.sum(1, true);
}

torch::Tensor euler_sample_experts(const std::vector<Dit*>& experts, Router& router, const DitCondition& condition,
                                   const SampleOptions& options, RoutingRule rule, const torch::Tensor& evidence) {
    TORCH_CHECK(!experts.empty() && static_cast<std::int64_t>(experts.size()) == router->experts(),
                "the router routes between ", router->experts(), " experts, not ", experts.size());
    torch::NoGradGuard no_grad;
    auto rows = condition_rows(condition);
    auto device = condition.text.defined() ? condition.text.device() : condition.labels.device();
    auto x = sampling_noise((*experts.front())->config(), rows, options.seed, device);
    torch::Tensor row_evidence;  // (B, E): each row's evidence, or none
    if (evidence.defined() && condition.labels.defined()) {
        TORCH_CHECK(evidence.size(0) == static_cast<std::int64_t>(experts.size()), "class evidence for ",
                    evidence.size(0), " experts, not ", experts.size());
        row_evidence = evidence.to(device).index_select(1, condition.labels).t();
    } else if (evidence.defined()) {
        TORCH_CHECK(evidence.dim() == 2 && evidence.size(0) == rows &&
                        evidence.size(1) == static_cast<std::int64_t>(experts.size()),
                    "caption evidence must be (", rows, ", ", experts.size(), ")");
        row_evidence = evidence.to(device);
    }
    double dt = 1.0 / static_cast<double>(options.steps);
    for (std::int64_t i = options.steps; i > 0; --i) {
        auto t = torch::full({rows}, static_cast<double>(i) * dt, x.options());
        auto logits = router->forward(x, t).to(torch::kFloat32);
        auto weights = routing_weights(row_evidence.defined() ? logits + row_evidence : logits, rule);
        auto v = torch::zeros_like(x);
        for (std::size_t k = 0; k < experts.size(); ++k) {
            auto w = weights.select(1, static_cast<std::int64_t>(k));
            auto index = w.gt(0).nonzero().flatten();
            if (index.numel() == 0) continue;
            auto& expert = *experts[k];
            auto part = rows_of(condition, index);
            auto guided = guided_velocity(expert, x.index_select(0, index), t.index_select(0, index), part,
                                          expert->unconditional(index.numel(), device), options.guidance);
            v.index_add_(0, index, guided.to(x.dtype()) * w.index_select(0, index).view({-1, 1, 1, 1}));
        }
        x = x - dt * v;
    }
    return x;
}

}  // namespace tessera::common
