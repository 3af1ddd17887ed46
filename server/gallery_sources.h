// What a task's gallery draws, beyond a class task's classes: a text task's caption rows, and an
// expert group's router task drawing the group as one model (docs/experts.md, "The group's
// samples"). Torch-free: the renderers are behind server/torch's headers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "blob_store.h"
#include "dashboard.h"
#include "dataset_manifest.h"
#include "model_cache.h"
#include "sample_gallery.h"
#include "store.h"
#include "task_config.h"

namespace tessera::server {

// The captions of a text task's gallery rows: the first `count` of the validation shard of the
// dataset in `data_dir`, as texts where the shard carries them, else numbered.
std::vector<std::string> gallery_captions(const std::string& data_dir, const common::DatasetManifest& manifest,
                                          std::int64_t count);

// A group's router task draws the group: the experts' newest weights (their EMA where they keep
// one, as their own galleries) through the router's version. Its gallery's rows (into `facts`)
// are the experts' classes, or for a text group the first captions of each expert's validation
// shard. None without a decoder, or when the group cannot be read (logged).
std::optional<SampleRendererFactory> group_renderer_for(Store& store, BlobStore& blobs, ModelCache& models,
                                                        const TaskConfig& router,
                                                        const common::Result<common::DatasetManifest>& manifest,
                                                        TaskFacts& facts);

}  // namespace tessera::server
