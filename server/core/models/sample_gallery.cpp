// SampleGallery: at most one render at a time, on the work pool, with a rest after each.
#include "sample_gallery.h"

#include <algorithm>
#include <charconv>

#include "checkpoint.h"
#include "executor.h"
#include "model_ema.h"
#include "safetensors.h"

namespace tessera::server {
namespace {

constexpr int kRestFactor = 3;  // rest 3× the drawing's time: drawing ≤ 1/4 of a thread

}  // namespace

GalleryWeights published_weights(ModelCache& models, std::string task_id) {
    return [&models, task_id = std::move(task_id)](std::int64_t version) { return models.get(task_id, version); };
}

GalleryWeights ema_weights(VersionStore& versions, BlobStore& blobs, ModelCache& models, std::string task_id) {
    auto last = std::make_shared<std::pair<std::string, std::shared_ptr<const common::NamedTensors>>>();
    return [&versions, &blobs, &models, task_id = std::move(task_id),
            last](std::int64_t version) -> common::Result<std::shared_ptr<const common::NamedTensors>> {
        auto checkpoint = versions.last_checkpoint(task_id, version);
        if (!checkpoint) return checkpoint.error();
        if (!*checkpoint || !(*checkpoint)->optimizer_sha256) return models.get(task_id, version);
        const auto& sha256 = *(*checkpoint)->optimizer_sha256;
        if (last->first == sha256) return last->second;  // renders come one at a time
        auto bytes = blobs.read(sha256, common::kMaxModelBytes);
        if (!bytes) return bytes.error();
        auto state = common::read_checkpoint(*bytes);
        if (!state) return state.error();
        auto ema = split_saved_state(std::move(*state)).ema;
        if (ema.empty()) return models.get(task_id, version);
        last->first = sha256;
        last->second = std::make_shared<const common::NamedTensors>(std::move(ema));
        return last->second;
    };
}

SampleGallery::SampleGallery(GalleryWeights weights, SampleRendererFactory factory, Executor executor, std::size_t keep,
                             PromptRendererFactory prompts)
    : weights_(std::move(weights)), factory_(std::move(factory)), executor_(std::move(executor)), keep_(keep),
      prompt_factory_(std::move(prompts)) {}

SampleStatus SampleGallery::request(std::int64_t current_version) {
    std::unique_lock lock(mutex_);
    bool start = current_version > attempted_ && may_start(std::chrono::steady_clock::now());
    if (start) {
        rendering_ = true;
        attempted_ = current_version;
    }
    SampleStatus status;
    if (!images_.empty()) status.version = images_.rbegin()->first;
    status.rendering = rendering_;
    status.error = error_;
    lock.unlock();
    if (start) executor_([self = shared_from_this(), current_version] { self->render(current_version); });
    return status;
}

std::shared_ptr<const common::Bytes> SampleGallery::image(std::int64_t version) {
    std::lock_guard lock(mutex_);
    auto found = images_.find(version);
    return found == images_.end() ? nullptr : found->second;
}

void SampleGallery::render(std::int64_t version) {
    auto started = std::chrono::steady_clock::now();
    auto rendered = [&]() -> common::Result<common::Bytes> {
        if (!renderer_) {
            auto made = factory_();
            if (!made) return made.error();
            renderer_ = std::move(*made);
        }
        auto weights = weights_(version);
        if (!weights) return weights.error();
        return renderer_->render(**weights);
    }();
    std::lock_guard lock(mutex_);
    finish(started);
    if (!rendered) {
        error_ = "version " + std::to_string(version) + ": " + rendered.message();
        return;
    }
    error_.clear();
    images_[version] = std::make_shared<const common::Bytes>(std::move(*rendered));
    while (images_.size() > keep_) images_.erase(images_.begin());
}

void SampleGallery::finish(std::chrono::steady_clock::time_point started) {
    auto finished = std::chrono::steady_clock::now();
    rendering_ = false;
    rest_until_ = finished + kRestFactor * (finished - started);
}

PromptStatus SampleGallery::prompt(std::int64_t version, const PromptRequest& request, const std::string& key) {
    char guidance[32];
    auto end = std::to_chars(guidance, guidance + sizeof guidance, request.guidance).ptr;
    auto cache_key =
        std::to_string(version) + "|" + std::string(guidance, end) + "|" + std::to_string(request.seed) + "|" + key;
    auto now = std::chrono::steady_clock::now();
    std::unique_lock lock(mutex_);
    PromptStatus status;
    if (auto found = prompt_images_.find(cache_key); found != prompt_images_.end()) {
        status.image = found->second.image;
        status.error = found->second.error;
        return status;
    }
    if (prompt_drawing_ == cache_key) {
        status.drawing = true;
        return status;
    }
    if (!prompt_factory_) {
        status.error = "this task draws no prompts";
        return status;
    }
    if (!may_start(now)) {
        status.retry_after_s = std::max(1.0, std::chrono::duration<double>(rest_until_ - now).count());
        return status;
    }
    rendering_ = true;
    prompt_drawing_ = cache_key;
    status.drawing = true;
    lock.unlock();
    executor_(
        [self = shared_from_this(), version, request, cache_key] { self->render_prompt(version, request, cache_key); });
    return status;
}

void SampleGallery::render_prompt(std::int64_t version, PromptRequest request, std::string cache_key) {
    auto started = std::chrono::steady_clock::now();
    auto rendered = [&]() -> common::Result<common::Bytes> {
        if (!prompt_renderer_) {
            auto made = prompt_factory_();
            if (!made) return made.error();
            prompt_renderer_ = std::move(*made);
        }
        auto weights = weights_(version);
        if (!weights) return weights.error();
        return prompt_renderer_->render(**weights, request);
    }();
    std::lock_guard lock(mutex_);
    finish(started);
    prompt_drawing_.clear();
    PromptImage drawn{++prompt_order_, nullptr, ""};
    if (rendered)
        drawn.image = std::make_shared<const common::Bytes>(std::move(*rendered));
    else
        drawn.error = "version " + std::to_string(version) + ": " + rendered.message();
    prompt_images_[cache_key] = std::move(drawn);
    while (prompt_images_.size() > kPromptImagesKept)
        prompt_images_.erase(
            std::min_element(prompt_images_.begin(), prompt_images_.end(),
                             [](const auto& a, const auto& b) { return a.second.order < b.second.order; }));
}

}  // namespace tessera::server
