// The routed Euler sampler of decentralized experts.
#include "expert_sampling.h"

#include <torch/torch.h>

namespace tessera::common {
namespace {

// Rows `index` (i64) of every tensor of the condition.
DitCondition rows_of(const DitCondition& condition, const torch::Tensor& index) {
    auto pick = [&](const torch::Tensor& t) { return t.defined() ? t.index_select(0, index) : t; };
    return {pick(condition.labels), pick(condition.text), pick(condition.text_len)};
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
                                   const SampleOptions& options, RoutingRule rule) {
    TORCH_CHECK(!experts.empty() && static_cast<std::int64_t>(experts.size()) == router->experts(),
                "the router routes between ", router->experts(), " experts, not ", experts.size());
    torch::NoGradGuard no_grad;
    auto rows = condition_rows(condition);
    auto device = condition.text.defined() ? condition.text.device() : condition.labels.device();
    auto x = sampling_noise((*experts.front())->config(), rows, options.seed, device);
    double dt = 1.0 / static_cast<double>(options.steps);
    for (std::int64_t i = options.steps; i > 0; --i) {
        auto t = torch::full({rows}, static_cast<double>(i) * dt, x.options());
        auto weights = routing_weights(router->forward(x, t), rule);
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
