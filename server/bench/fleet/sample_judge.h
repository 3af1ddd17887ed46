// The sample-quality figure of a class-conditional DiT: the share of its samples that a
// classifier trained on the real images assigns to the class they were drawn for (a
// classification accuracy score). The judge is the cnn preset trained on the pixel dataset;
// its accuracy on the real test images is the ceiling, and its accuracy on the test latents
// passed through the same decoder is the ceiling the autoencoder leaves.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "delta_codec.h"
#include "expert_clusters.h"
#include "fleet_run.h"
#include "result.h"

namespace tessera::bench {

struct JudgeOptions {
    std::filesystem::path pixels;   // the pixel dataset (real images) the judge learns from
    std::filesystem::path latents;  // the latent dataset whose decoder turns samples into images
    std::filesystem::path cache;    // the judge's weights: reused when they load, else written
    std::int64_t epochs = 10;
    std::int64_t per_class = 100;  // samples drawn per class for a score
    std::int64_t sampling_steps = 20;
    std::uint64_t seed = 1;  // the judge's initialisation and the samples' noise
    bool quiet = false;
};

// A model's samples judged: the share classified as asked (CAS) and the Fréchet distance of the
// judge's penultimate features to the real test images' (FID, docs/fleet_simulator.md).
struct SampleFigures {
    double cas = -1;
    double fid = -1;
};

struct JudgeCeilings {
    double real_images = 0;    // the judge on the real test images
    double reconstructed = 0;  // on the real test latents, decoded
};

class SampleJudge {
public:
    // Loads the judge from the cache, or trains it (a few minutes on two cores) and saves it.
    static common::Result<std::unique_ptr<SampleJudge>> make(const JudgeOptions& options);
    ~SampleJudge();

    const JudgeCeilings& ceilings() const;
    // The share of `per_class` samples per class of the DiT preset `model` with `weights`, drawn
    // at classifier-free guidance `guidance` (1: the conditional model alone; 0: unconditional),
    // that the judge classifies as the class asked for. Deterministic for given weights.
    common::Result<double> score(const std::string& model, const common::NamedTensors& weights, double guidance = 3.0);
    // The same samples' CAS and FID.
    common::Result<SampleFigures> figures(const std::string& model, const common::NamedTensors& weights,
                                          double guidance = 3.0);
    // Decentralized experts' (docs/experts.md) with the same noise: the experts of preset
    // `expert_model`, in the router's order, sampled through the router by `rule` (top1, top2,
    // all; with -class, by the class too, from the `clusters`' class counts) at guidance
    // `guidance` for each expert.
    common::Result<SampleFigures> routed_figures(const std::string& expert_model,
                                                 const std::vector<const common::NamedTensors*>& experts,
                                                 const common::NamedTensors& router, const std::string& rule,
                                                 const common::ClusterManifest& clusters, double guidance = 3.0);

private:
    struct Impl;
    explicit SampleJudge(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// score() at each guidance scale, in order.
common::Result<std::vector<double>> score_by_guidance(SampleJudge& judge, const std::string& model,
                                                      const common::NamedTensors& weights,
                                                      const std::vector<double>& guidances);
// A run's sample quality: score_by_guidance into `run` (the first scale is its headline figure).
common::Status score_run(SampleJudge& judge, const std::string& model, const common::NamedTensors& weights,
                         const std::vector<double>& guidances, RunResult& run);

}  // namespace tessera::bench
