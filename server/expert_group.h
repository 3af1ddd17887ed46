// Decentralized experts as tasks (docs/experts.md): a `tessera-data cluster` directory becomes one
// ordinary task per cluster and one router task, tied by their config's expert_group. Nothing
// passes between them: each has its own model, versions, merging, checks and credit.
#pragma once

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "result.h"
#include "store_tasks.h"
#include "task_config.h"
#include "task_lookup.h"

namespace tessera::server {

inline constexpr const char* kRouterPreset = "router";

struct ExpertGroupMember {
    TaskConfig config;
    double weight = 1;  // its share of work among the running tasks
};

// Builds one task's config for a dataset directory and a preset ("" for the dataset's default),
// from the operator's flags.
using ConfigureTask =
    std::function<common::Result<TaskConfig>(const std::filesystem::path& data_dir, const std::string& model)>;

// The group's tasks, experts in cluster order and the router last. `group_id` "" names it
// `<source>-<model>-experts<E>`; members are `<group>-e<K>` and `<group>-router`. Expert K's
// weight is `weight` × its share of the training samples, the router's `weight` / E; the router
// trains the router preset at its own rate, without patch masking, whatever the flags say.
common::Result<std::vector<ExpertGroupMember>> plan_expert_group(const std::filesystem::path& clusters_dir,
                                                                 const std::string& group_id, double weight,
                                                                 const ConfigureTask& configure);

// The rule a group is sampled by unless one is asked for (its gallery, `export --group`): the one
// expert the class and the router favour most (top1-class) where the experts are class models and
// the router knows their class counts — the lowest FID in 8 of the 10 measured cases
// (docs/benchmarks.md, "Issue 55"); for caption experts the one the caption and the router favour
// most (top1-caption) where the router holds the clusters made on captions — far ahead of the
// router alone on the canvases — else the router's most likely one (top1: ahead of top-2 in 6
// of 8 figures there); else the router's two most likely experts (top2). `expert`: any member
// expert's config.
std::string default_group_routing(const TaskConfig& router, const TaskConfig& expert);

// The experts of the router's group, by index, as stored; an error unless they are 0 … E − 1 for
// the router's E.
common::Result<std::vector<TaskView>> group_experts(TaskStore& store, const TaskConfig& router);

}  // namespace tessera::server
