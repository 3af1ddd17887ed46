// Images sampled from the model for the dashboard: one PNG grid per model version (a row per
// class), rendered in the background when someone asks for a version newer than the last
// one drawn. One drawing at a time, and after each a pause three times as long, so drawing
// takes at most a quarter of one work thread however many people watch. Rendering sits
// behind an interface so the server's core stays free of torch (server/torch implements
// it). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "bytes.h"
#include "delta_codec.h"
#include "blob_store.h"
#include "model_cache.h"
#include "result.h"
#include "state_dir.h"
#include "store.h"

namespace tessera::server {

// Not thread-safe: the gallery renders one grid at a time.
class SampleRenderer {
public:
    virtual ~SampleRenderer() = default;
    // A PNG of images generated from `weights`, the same noise for every version.
    virtual common::Result<common::Bytes> render(const common::NamedTensors& weights) = 0;
};

// Builds the renderer on first use (loading the decoder can take a moment).
using SampleRendererFactory = std::function<common::Result<std::unique_ptr<SampleRenderer>>()>;

// The weights a version's image is drawn from. Called on a work thread, one call at a time.
using GalleryWeights = std::function<common::Result<std::shared_ptr<const common::NamedTensors>>(std::int64_t version)>;
// The published model of each version.
GalleryWeights published_weights(ModelCache& models, std::string task_id);
// The EMA saved with the newest checkpoint at or before the version (server/aggregation/
// model_ema.h); the published model where that checkpoint has none (version 0).
GalleryWeights ema_weights(Store& store, BlobStore& blobs, ModelCache& models, std::string task_id);

struct SampleStatus {
    std::optional<std::int64_t> version;  // the newest version with an image
    bool rendering = false;
    std::string error;  // the last render's failure, if it failed
};

// Owned by shared_ptr: a render's job holds it until the job is done.
class SampleGallery : public std::enable_shared_from_this<SampleGallery> {
public:
    SampleGallery(GalleryWeights weights, SampleRendererFactory factory, Executor executor, std::size_t keep = 4);

    // Starts rendering `current_version` when it is newer than the last image, nothing is
    // being rendered and the pause after the last drawing is over; returns the state.
    SampleStatus request(std::int64_t current_version);
    // The image of `version`, while it is among the `keep` newest.
    std::shared_ptr<const common::Bytes> image(std::int64_t version);

private:
    void render(std::int64_t version);

    GalleryWeights weights_;
    SampleRendererFactory factory_;
    Executor executor_;
    std::size_t keep_;
    std::unique_ptr<SampleRenderer> renderer_;  // used by the one running render only

    std::mutex mutex_;
    std::map<std::int64_t, std::shared_ptr<const common::Bytes>> images_;
    bool rendering_ = false;
    std::int64_t attempted_ = -1;  // the newest version tried, failed or not: never retried
    std::chrono::steady_clock::time_point rest_until_{};
    std::string error_;
};

}  // namespace tessera::server
