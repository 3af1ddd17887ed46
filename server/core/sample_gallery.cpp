// SampleGallery: at most one render at a time, on the work pool, with a rest after each.
#include "sample_gallery.h"

#include "checkpoint.h"
#include "model_ema.h"
#include "safetensors.h"

namespace tessera::server {
namespace {

constexpr int kRestFactor = 3;  // rest 3× the drawing's time: drawing ≤ 1/4 of a thread

}  // namespace

GalleryWeights published_weights(ModelCache& models, std::string task_id) {
    return [&models, task_id = std::move(task_id)](std::int64_t version) { return models.get(task_id, version); };
}

GalleryWeights ema_weights(Store& store, BlobStore& blobs, ModelCache& models, std::string task_id) {
    auto last = std::make_shared<std::pair<std::string, std::shared_ptr<const common::NamedTensors>>>();
    return [&store, &blobs, &models, task_id = std::move(task_id),
            last](std::int64_t version) -> common::Result<std::shared_ptr<const common::NamedTensors>> {
        auto checkpoint = store.last_checkpoint(task_id, version);
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

SampleGallery::SampleGallery(GalleryWeights weights, SampleRendererFactory factory, Executor executor, std::size_t keep)
    : weights_(std::move(weights)), factory_(std::move(factory)), executor_(std::move(executor)), keep_(keep) {}

SampleStatus SampleGallery::request(std::int64_t current_version) {
    std::unique_lock lock(mutex_);
    bool start = !rendering_ && current_version > attempted_ && std::chrono::steady_clock::now() >= rest_until_;
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
    auto finished = std::chrono::steady_clock::now();
    std::lock_guard lock(mutex_);
    rendering_ = false;
    rest_until_ = finished + kRestFactor * (finished - started);
    if (!rendered) {
        error_ = "version " + std::to_string(version) + ": " + rendered.message();
        return;
    }
    error_.clear();
    images_[version] = std::make_shared<const common::Bytes>(std::move(*rendered));
    while (images_.size() > keep_) images_.erase(images_.begin());
}

}  // namespace tessera::server
