// The samples of an expert group (docs/experts.md, "The group's samples"): the router task's
// gallery draws the group as one model — each expert's newest weights, sampled through the
// router's version being drawn by the group's routing rule — a row per class, as a single
// task's gallery does, or for a text group a row per caption, the first few of each expert's
// validation shard. Behind a torch-free header, as server/torch/torch_model.h.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "sample_gallery.h"
#include "task_config.h"

namespace tessera::server {

// Each expert's weights now, in index order (the order of the router's logits).
using ExpertWeightsResult = common::Result<std::vector<std::shared_ptr<const common::NamedTensors>>>;
using ExpertWeightsNow = std::function<ExpertWeightsResult()>;

// A text group's gallery rows from each expert's validation shard: kGalleryCaptions over E, at
// least one.
std::int64_t group_captions_per_expert(std::int64_t experts);

// A renderer of the group's grid for the router task `router`, its experts' preset and classes
// from `expert` (any member expert's config); none unless the experts generate images. A text
// group's rows are the first group_captions_per_expert captions of each `caption_shards` (each
// expert's validation shard, in index order; none for a class group).
std::optional<SampleRendererFactory> make_torch_group_renderer_factory(
    const TaskConfig& router, const TaskConfig& expert, const std::filesystem::path& decoder_file, double latent_scale,
    ExpertWeightsNow experts, std::vector<std::filesystem::path> caption_shards = {});

}  // namespace tessera::server
