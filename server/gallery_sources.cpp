// Caption rows and an expert group's renderer for the galleries.
#include "gallery_sources.h"

#include <algorithm>
#include <filesystem>

#include "caption_text.h"
#include "expert_group.h"
#include "file_io.h"
#include "logger.h"
#include "torch_group_samples.h"

namespace tessera::server {

std::vector<std::string> gallery_captions(const std::string& data_dir, const common::DatasetManifest& manifest,
                                          std::int64_t count) {
    auto bytes =
        common::read_file(std::filesystem::path(data_dir) / manifest.validation.file, common::kMaxCaptionShardBytes);
    auto texts = bytes ? common::read_caption_texts(*bytes, static_cast<std::size_t>(count)) : bytes.error();
    if (texts && !texts->empty()) return *texts;
    if (!texts) common::process_log().error("samples", "the validation captions: " + texts.message());
    std::vector<std::string> numbered;
    auto rows = std::min<std::int64_t>(count, manifest.validation.samples);
    for (std::int64_t i = 0; i < rows; ++i) numbered.push_back("caption " + std::to_string(i + 1));
    return numbered;
}

namespace {

// Each expert's weights now, from its gallery's source (EMA or published) at its version.
ExpertWeightsNow expert_weights_now(Store& store, BlobStore& blobs, ModelCache& models,
                                    const std::vector<TaskView>& experts) {
    std::vector<std::pair<std::string, GalleryWeights>> sources;
    for (const auto& expert : experts)
        sources.emplace_back(expert.record.id, expert.config.ema_decay > 0
                                                   ? ema_weights(store, blobs, models, expert.record.id)
                                                   : published_weights(models, expert.record.id));
    auto* tasks = &store;
    return [tasks, sources]() -> ExpertWeightsResult {
        std::vector<std::shared_ptr<const common::NamedTensors>> weights;
        for (const auto& [id, source] : sources) {
            auto record = tasks->task(id);
            if (!record) return record.error();
            if (!*record) return common::make_error("expert task " + id + " is gone");
            auto at = source((*record)->version);
            if (!at) return common::with_context(id, at.error());
            weights.push_back(std::move(*at));
        }
        return weights;
    };
}

}  // namespace

std::optional<SampleRendererFactory> group_renderer_for(Store& store, BlobStore& blobs, ModelCache& models,
                                                        const TaskConfig& router,
                                                        const common::Result<common::DatasetManifest>& manifest,
                                                        TaskFacts& facts) {
    if (!manifest || manifest->decoder.file.empty()) return std::nullopt;
    auto experts = group_experts(store, router);
    if (!experts) {
        common::process_log().error("samples", "task " + router.task_id + ": " + experts.message());
        return std::nullopt;
    }
    if (experts->empty()) return std::nullopt;
    std::vector<std::filesystem::path> caption_shards;
    facts.classes.clear();
    for (const auto& expert : *experts) {
        auto expert_manifest =
            common::load_dataset_manifest(std::filesystem::path(expert.config.data_dir) / "dataset.json");
        if (!expert_manifest) continue;
        if (expert.config.text_dim <= 0) {
            facts.classes = expert_manifest->classes;
            break;
        }
        auto rows = group_captions_per_expert(static_cast<std::int64_t>(experts->size()));
        auto texts = gallery_captions(expert.config.data_dir, *expert_manifest, rows);
        facts.classes.insert(facts.classes.end(), texts.begin(), texts.end());
        caption_shards.push_back(std::filesystem::path(expert.config.data_dir) / expert_manifest->validation.file);
    }
    facts.routing = default_group_routing(router, experts->front().config);
    return make_torch_group_renderer_factory(
        router, experts->front().config, std::filesystem::path(router.data_dir) / manifest->decoder.file,
        manifest->scale_factor, expert_weights_now(store, blobs, models, *experts), caption_shards);
}

}  // namespace tessera::server
