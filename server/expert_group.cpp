// An expert group's tasks from a cluster directory's clusters.json.
#include "expert_group.h"

#include <algorithm>

#include "expert_clusters.h"
#include "protocol.h"

namespace tessera::server {
namespace {

common::Status check_member_id(const std::string& id) {
    if (id.empty() || id.size() > common::kMaxIdentifier)
        return common::make_error("task id \"" + id + "\" must be 1.." + std::to_string(common::kMaxIdentifier) +
                                  " characters: give the group a shorter --id");
    return {};
}

common::Result<ExpertGroupMember> member(const ConfigureTask& configure, const std::filesystem::path& data_dir,
                                         const std::string& model, const std::string& id, const std::string& group,
                                         std::int64_t index, double weight) {
    if (auto status = check_member_id(id); !status) return status.error();
    auto config = configure(data_dir, model);
    if (!config) return common::with_context(data_dir.filename().string(), config.error());
    config->task_id = id;
    config->expert_group = group;
    config->expert_index = index;
    if (index == kRouterIndex) {
        config->patch_mask = 0;
        config->lr = default_lr(*config);
    }
    if (auto status = validate_task_config(*config); !status) return common::with_context(id, status.error());
    return ExpertGroupMember{std::move(*config), weight};
}

}  // namespace

common::Result<std::vector<ExpertGroupMember>> plan_expert_group(const std::filesystem::path& clusters_dir,
                                                                 const std::string& group_id, double weight,
                                                                 const ConfigureTask& configure) {
    auto clusters = common::load_cluster_manifest(clusters_dir / "clusters.json");
    if (!clusters) return common::with_context("--experts", clusters.error());
    if (!(weight >= 0)) return common::make_error("--weight must be >= 0");
    std::int64_t total = 0;
    for (auto size : clusters->sizes) total += size;
    if (total <= 0) return common::make_error("clusters.json lists no training samples");

    // The experts' model names the group, as a task's model names it.
    auto first = configure(clusters_dir / clusters->expert_dirs.at(0), "");
    if (!first) return common::with_context(clusters->expert_dirs.at(0), first.error());
    auto group = !group_id.empty()
                     ? group_id
                     : clusters->source + "-" + first->model + "-experts" + std::to_string(clusters->experts);
    if (auto status = check_member_id(group); !status) return status.error();

    std::vector<ExpertGroupMember> members;
    for (std::int64_t k = 0; k < clusters->experts; ++k) {
        auto share = static_cast<double>(clusters->sizes.at(static_cast<std::size_t>(k))) / static_cast<double>(total);
        auto expert = member(configure, clusters_dir / clusters->expert_dirs.at(static_cast<std::size_t>(k)),
                             first->model, group + "-e" + std::to_string(k), group, k, weight * share);
        if (!expert) return expert.error();
        members.push_back(std::move(*expert));
    }
    auto router = member(configure, clusters_dir / clusters->router_dir, kRouterPreset, group + "-router", group,
                         kRouterIndex, weight / static_cast<double>(clusters->experts));
    if (!router) return router.error();
    router->config.expert_class_counts = clusters->class_counts;
    // Clusters made on the pooled caption: the prompt says its cluster (docs/experts.md).
    if (clusters->features == "text" && clusters->feature_dim == first->text_dim)
        router->config.expert_caption_clusters = {clusters->centres, clusters->sizes, clusters->inertia};
    if (auto status = validate_task_config(router->config); !status)
        return common::with_context(router->config.task_id, status.error());
    members.push_back(std::move(*router));
    return members;
}

std::string default_group_routing(const TaskConfig& router, const TaskConfig& expert) {
    // Text groups: the caption's evidence when the clusters were made on captions (far ahead in
    // the simulator), else the router alone, top-1 (ahead of top-2 there).
    if (expert.text_dim > 0) return router.expert_caption_clusters.empty() ? "top1" : "top1-caption";
    return router.expert_class_counts.empty() ? "top2" : "top1-class";
}

// An expert group's members other than the router, by index, as stored.
common::Result<std::vector<TaskView>> group_experts(TaskStore& store, const TaskConfig& router) {
    auto tasks = store.tasks();
    if (!tasks) return tasks.error();
    std::vector<TaskView> experts;
    for (auto& record : *tasks) {
        auto view = task_view(std::move(record));
        if (!view) return view.error();
        if (view->config.expert_group == router.expert_group && view->config.expert_index >= 0)
            experts.push_back(std::move(*view));
    }
    std::sort(experts.begin(), experts.end(),
              [](const auto& a, const auto& b) { return a.config.expert_index < b.config.expert_index; });
    for (std::size_t k = 0; k < experts.size(); ++k)
        if (experts[k].config.expert_index != static_cast<std::int64_t>(k))
            return common::make_error("expert group " + router.expert_group + " lacks expert " + std::to_string(k));
    if (static_cast<std::int64_t>(experts.size()) != router.num_classes)
        return common::make_error("expert group " + router.expert_group + " has " + std::to_string(experts.size()) +
                                  " experts, its router routes between " + std::to_string(router.num_classes));
    return experts;
}

}  // namespace tessera::server
