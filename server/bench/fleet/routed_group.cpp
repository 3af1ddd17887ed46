// RoutedGroup: the experts and router in their presets, and each routing rule's evidence.
#include "routed_group.h"

#include <torch/torch.h>

#include "torch/model_state.h"
#include "torch/tensor_convert.h"

namespace tessera::bench {
namespace {

// Refuses a rule whose condition the clusters or the data cannot give.
common::Status check_prior(common::RoutingPrior prior, const std::string& rule, const common::DataShape& shape,
                           const common::ClusterManifest& clusters) {
    if (prior == common::RoutingPrior::Class) {
        if (shape.text_dim > 0)
            return common::make_error("routing " + rule + " routes by class; the data has captions");
        if (clusters.class_counts.empty())
            return common::make_error("routing " + rule + " needs the clusters' class counts (cluster the data again)");
    }
    if (prior == common::RoutingPrior::Caption) {
        if (shape.text_dim <= 0) return common::make_error("routing " + rule + " routes by caption; the data has none");
        if (clusters.features != "text" || clusters.feature_dim != shape.text_dim)
            return common::make_error("routing " + rule +
                                      " needs clusters made on the pooled captions (tessera-data cluster --features "
                                      "text), not on " +
                                      clusters.features);
    }
    return {};
}

}  // namespace

common::Result<std::unique_ptr<RoutedGroup>> RoutedGroup::load(const std::string& expert_model,
                                                               const common::DataShape& shape,
                                                               const std::vector<const common::NamedTensors*>& experts,
                                                               const common::NamedTensors& router,
                                                               const std::string& rule,
                                                               const common::ClusterManifest& clusters) {
    auto routing = common::routing_from_name(rule);
    if (!routing) return routing.error();
    if (auto status = check_prior(routing->prior, rule, shape, clusters); !status) return status.error();
    std::unique_ptr<RoutedGroup> group(new RoutedGroup());
    group->routing_ = *routing;
    group->clusters_ = clusters;
    try {
        torch::NoGradGuard no_grad;
        for (const auto* weights : experts) {
            auto workload = common::make_workload(expert_model, shape, 0);
            if (!workload) return workload.error();
            auto* dit = common::dit_of(**workload);
            if (dit == nullptr) return common::make_error("model " + expert_model + " does not generate images");
            if (auto status = common::load_state(*(*workload)->module(), common::from_named_f32(*weights)); !status)
                return common::with_context("expert " + std::to_string(group->dits_.size()), status.error());
            (*dit)->eval();
            group->dits_.push_back(dit);
            group->models_.push_back(std::move(*workload));
        }
        auto router_shape = shape;
        router_shape.num_classes = static_cast<std::int64_t>(experts.size());
        router_shape.text_dim = 0;
        auto routing_model = common::make_workload("router", router_shape, 0);
        if (!routing_model) return routing_model.error();
        if (auto status = common::load_state(*(*routing_model)->module(), common::from_named_f32(router)); !status)
            return common::with_context("router", status.error());
        (*common::router_of(**routing_model))->eval();
        group->router_ = std::move(*routing_model);
        if (routing->prior == common::RoutingPrior::Class)
            group->class_evidence_ = common::class_evidence(clusters.class_counts);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("loading the experts: ") + error.what_without_backtrace());
    }
    return group;
}

torch::Tensor RoutedGroup::sample(const common::DitCondition& condition, const common::SampleOptions& options) {
    auto evidence = class_evidence_;
    if (routing_.prior == common::RoutingPrior::Caption)
        evidence = common::caption_evidence(clusters_.centres, clusters_.sizes, clusters_.inertia,
                                            common::pooled_captions(condition.text, condition.text_len));
    return common::euler_sample_experts(dits_, *common::router_of(*router_), condition, options, routing_.rule,
                                        evidence);
}

}  // namespace tessera::bench
