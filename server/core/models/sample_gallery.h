// Images sampled from the model for the dashboard: one PNG grid per model version (a row per
// class), rendered in the background when someone asks for a version newer than the last
// one drawn, and for a text task a row of samples for a prompt someone asks for (typed, or
// one of the dataset's captions; docs/dashboard.md, "Prompts"). One drawing at a time,
// grid or prompt, and after each a pause three times as long, so drawing takes at most a
// quarter of one work thread however many people watch. Rendering sits behind interfaces
// so the server's core stays free of torch (server/torch implements them). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "bytes.h"
#include "delta_codec.h"
#include "blob_store.h"
#include "executor.h"
#include "model_cache.h"
#include "result.h"
#include "state_dir.h"
#include "store_versions.h"

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

// A prompt the dashboard asks a text task to draw: typed words, or one of the dataset's captions.
struct PromptRequest {
    std::string text;           // typed, in the stand-in text encoder's vocabulary; or
    std::int64_t caption = -1;  // the index of one of PromptBook::captions()
    double guidance = 3.0;      // classifier-free guidance scale (1: none)
    std::uint64_t seed = 0;     // the samples' noise
};
constexpr std::int64_t kPromptSamples = 8;  // images drawn for a prompt, in one row
constexpr double kMinPromptGuidance = 1.0;
constexpr double kMaxPromptGuidance = 10.0;
constexpr std::size_t kMaxPromptBytes = 512;  // of typed text
constexpr std::size_t kPromptImagesKept = 16;

// One of the dataset's captions a prompt may pick: its text (or "caption N" where the shard
// holds none) and its split ("validation" or "heldout": combinations training never saw).
struct PromptCaption {
    std::string text;
    std::string split;
};

// What a text task can draw: the dataset's captions (their cached embeddings), and typed
// prompts where the dataset ships the stand-in text encoder. Immutable; thread-safe.
class PromptBook {
public:
    virtual ~PromptBook() = default;
    virtual const std::vector<PromptCaption>& captions() const = 0;
    // The encoder's words; empty without an encoder (a T5 or CLIP dataset: captions only).
    virtual const std::vector<std::string>& vocabulary() const = 0;
    // The request's cache key (its normalised words, or its caption), or why it cannot be
    // drawn: a word outside the vocabulary (named), too many words, no encoder, no such caption.
    virtual common::Result<std::string> key_of(const PromptRequest& request) const = 0;
};

// Not thread-safe: the gallery draws one prompt at a time.
class PromptRenderer {
public:
    virtual ~PromptRenderer() = default;
    // A PNG of kPromptSamples images of `request` generated from `weights`, in one row.
    virtual common::Result<common::Bytes> render(const common::NamedTensors& weights, const PromptRequest& request) = 0;
};
using PromptRendererFactory = std::function<common::Result<std::unique_ptr<PromptRenderer>>()>;

// The weights a version's image is drawn from. Called on a work thread, one call at a time.
using GalleryWeights = std::function<common::Result<std::shared_ptr<const common::NamedTensors>>(std::int64_t version)>;
// The published model of each version.
GalleryWeights published_weights(ModelCache& models, std::string task_id);
// The EMA saved with the newest checkpoint at or before the version (server/aggregation/
// model_ema.h); the published model where that checkpoint has none (version 0).
GalleryWeights ema_weights(VersionStore& versions, BlobStore& blobs, ModelCache& models, std::string task_id);

struct SampleStatus {
    std::optional<std::int64_t> version;  // the newest version with an image
    bool rendering = false;
    std::string error;  // the last render's failure, if it failed
};

// A prompt's image, or where its drawing stands.
struct PromptStatus {
    std::shared_ptr<const common::Bytes> image;  // drawn
    bool drawing = false;                        // this prompt is being drawn now
    double retry_after_s = 0;                    // neither: something else is drawn, or the pause
    std::string error;                           // its drawing failed (not retried for this version)
};

// Owned by shared_ptr: a render's job holds it until the job is done.
class SampleGallery : public std::enable_shared_from_this<SampleGallery> {
public:
    // `prompts` empty: the task draws no prompts.
    SampleGallery(GalleryWeights weights, SampleRendererFactory factory, Executor executor, std::size_t keep = 4,
                  PromptRendererFactory prompts = {});

    // Starts rendering `current_version` when it is newer than the last image, nothing is
    // being rendered and the pause after the last drawing is over; returns the state.
    SampleStatus request(std::int64_t current_version);
    // The image of `version`, while it is among the `keep` newest.
    std::shared_ptr<const common::Bytes> image(std::int64_t version);
    // The image of `request` (cache key `key`, from PromptBook::key_of) drawn from `version`'s
    // weights: the kPromptImagesKept newest prompts are kept; another is started when nothing
    // is drawn and the pause is over.
    PromptStatus prompt(std::int64_t version, const PromptRequest& request, const std::string& key);
    bool draws_prompts() const { return static_cast<bool>(prompt_factory_); }

private:
    void render(std::int64_t version);
    void render_prompt(std::int64_t version, PromptRequest request, std::string cache_key);
    // Whether a drawing may start: none runs and the pause is over. The mutex is held.
    bool may_start(std::chrono::steady_clock::time_point now) const { return !rendering_ && now >= rest_until_; }
    // Ends a drawing begun at `started` and starts the pause. The mutex is held.
    void finish(std::chrono::steady_clock::time_point started);

    GalleryWeights weights_;
    SampleRendererFactory factory_;
    Executor executor_;
    std::size_t keep_;
    std::unique_ptr<SampleRenderer> renderer_;  // used by the one running render only
    PromptRendererFactory prompt_factory_;
    std::unique_ptr<PromptRenderer> prompt_renderer_;  // likewise

    std::mutex mutex_;
    std::map<std::int64_t, std::shared_ptr<const common::Bytes>> images_;
    bool rendering_ = false;
    std::int64_t attempted_ = -1;  // the newest version tried, failed or not: never retried
    std::chrono::steady_clock::time_point rest_until_{};
    std::string error_;
    struct PromptImage {
        std::uint64_t order = 0;  // newer is larger: the oldest goes first
        std::shared_ptr<const common::Bytes> image;
        std::string error;
    };
    std::map<std::string, PromptImage> prompt_images_;  // by version, prompt, guidance and seed
    std::string prompt_drawing_;                        // the cache key being drawn, or empty
    std::uint64_t prompt_order_ = 0;
};

}  // namespace tessera::server
