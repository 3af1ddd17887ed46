// Prompt fidelity of a text DiT on the captioned canvases (`tessera-data prepare canvases`):
// it draws a canvas for each scored caption with classifier-free guidance, decodes it, and two
// cnn presets read each quadrant — the class cnn which of the captions' nouns it shows, the
// attribute cnn whether it is empty, plain, dark or light; prompt_fidelity.h turns the
// readings into the object, relation, attribute and held-out figures. Both cnns learn from
// decoded training canvases (the decoder's own renderings of items under the canvases'
// attributes, and empty quadrants), cached beside each other; the ceilings are the same
// figures on the scored captions' real canvases, decoded: what the autoencoder allows.
// Not thread-safe.
#pragma once

#include <torch/types.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "delta_codec.h"
#include "expert_clusters.h"
#include "fleet_run.h"
#include "prompt_fidelity.h"
#include "result.h"

namespace tessera::bench {

struct CaptionJudgeOptions {
    std::filesystem::path data;   // the captioned canvases dataset
    std::filesystem::path cache;  // the cnns' weights: <cache>-class.safetensors, <cache>-attribute.safetensors
    std::int64_t train_canvases = 12000;  // decoded training canvases the cnns learn from
    std::int64_t epochs = 6;
    std::int64_t captions = 500;  // validation captions scored, and held-out captions (at most the shard's)
    std::int64_t sampling_steps = 20;
    std::uint64_t seed = 1;  // the cnns' initialisation and the samples' noise
    bool quiet = false;
};

class CaptionJudge {
public:
    // Loads the cnns from the cache, or trains them (minutes on two cores) and saves them.
    static common::Result<std::unique_ptr<CaptionJudge>> make(const CaptionJudgeOptions& options);
    ~CaptionJudge();

    // The figures of the scored captions' real canvases, decoded.
    const PromptFidelity& ceilings() const;
    // The figures of the DiT preset `model` with `weights`, its canvases drawn at guidance
    // `guidance` (1: the caption alone; against the learned null caption). Deterministic.
    common::Result<PromptFidelity> score(const std::string& model, const common::NamedTensors& weights,
                                         double guidance = 3.0);
    // Decentralized experts' (docs/experts.md) with the same noise: the experts of preset
    // `expert_model`, in the router's order, sampled through the router by `rule` (top1, top2,
    // all; with -caption, by the caption too, from the `clusters`' centres).
    common::Result<PromptFidelity> routed_score(const std::string& expert_model,
                                                const std::vector<const common::NamedTensors*>& experts,
                                                const common::NamedTensors& router, const std::string& rule,
                                                const common::ClusterManifest& clusters, double guidance = 3.0);
    // The figures of given latents (stored scale) for the scored captions: `seen` one per
    // validation caption scored, `heldout` one per held-out caption scored.
    common::Result<PromptFidelity> score_latents(const torch::Tensor& seen, const torch::Tensor& heldout);
    // The scored captions' real latents (stored scale): validation, then held-out.
    const torch::Tensor& real_latents(bool heldout) const;

private:
    struct Impl;
    explicit CaptionJudge(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// A run's prompt fidelity at each guidance scale, into `run` (the first is its headline).
common::Status score_run_fidelity(CaptionJudge& judge, const std::string& model, const common::NamedTensors& weights,
                                  const std::vector<double>& guidances, RunResult& run);

}  // namespace tessera::bench
