// Decentralized experts loaded for judging (docs/fleet_simulator.md, "Experts against the
// monolithic model"): each expert's and the router's weights in their presets, sampled as one
// model by a routing rule through common::euler_sample_experts, with the condition's evidence
// from the clusters: the class counts for `-class` rules, the centres for `-caption` rules.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "delta_codec.h"
#include "expert_clusters.h"
#include "result.h"
#include "torch/expert_sampling.h"
#include "torch/workload.h"

namespace tessera::bench {

class RoutedGroup {
public:
    // Experts of preset `expert_model` in the router's order, on data of `shape`; refuses a rule
    // whose condition the clusters or the data lack (class counts, caption centres).
    static common::Result<std::unique_ptr<RoutedGroup>> load(const std::string& expert_model,
                                                             const common::DataShape& shape,
                                                             const std::vector<const common::NamedTensors*>& experts,
                                                             const common::NamedTensors& router,
                                                             const std::string& rule,
                                                             const common::ClusterManifest& clusters);

    // Latents for the condition's rows, as euler_sample draws them from one model.
    torch::Tensor sample(const common::DitCondition& condition, const common::SampleOptions& options);

private:
    RoutedGroup() = default;

    std::vector<std::unique_ptr<common::Workload>> models_;
    std::vector<common::Dit*> dits_;
    std::unique_ptr<common::Workload> router_;
    common::Routing routing_;
    common::ClusterManifest clusters_;
    torch::Tensor class_evidence_;  // (E, C) for -class rules
};

}  // namespace tessera::bench
