// SampleJudge: a cnn trained on the real images scores decoded DiT samples.
#include "sample_judge.h"

#include <torch/torch.h>

#include <functional>
#include <iostream>

#include "dataset_manifest.h"
#include "frechet_distance.h"
#include "judge_cnn.h"
#include "routed_group.h"
#include "torch/models/cnn.h"
#include "torch/models/autoencoder.h"
#include "torch/model_state.h"
#include "torch/rectified_flow.h"
#include "torch/shard_data.h"
#include "torch/workload.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kBatch = 250;  // samples drawn and judged at once

// How the judge was made: a cache made any other way (or from other images) is not reused.
JudgeCnnRecipe recipe_of(const JudgeOptions& options, const common::DatasetManifest& pixels) {
    JudgeCnnRecipe recipe{options.epochs, options.seed, ""};
    for (const auto& file : pixels.train) recipe.data += file.sha256.substr(0, 12) + ",";
    return recipe;
}

common::DataShape shape_of(const common::DatasetManifest& manifest) {
    common::DataShape shape;
    shape.channels = manifest.sample_shape.at(0);
    shape.size = manifest.sample_shape.at(1);
    shape.num_classes = static_cast<std::int64_t>(manifest.classes.size());
    shape.text_dim = manifest.text_dim;
    return shape;
}

}  // namespace

struct SampleJudge::Impl {
    JudgeOptions options;
    common::DatasetManifest latents;
    common::Cnn judge;
    common::Decoder decoder;
    JudgeCeilings ceilings;
    GaussianStats real_stats;  // the judge's features of the real test images (FID's reference)

    // A model's latents for a batch of labels, drawn with the given options.
    using Sampler = std::function<torch::Tensor(const torch::Tensor& labels, const common::SampleOptions&)>;

    // per_class samples of every class from `sample`, decoded: the share the judge classifies as
    // asked, and the Fréchet distance of their features to the real test images'.
    SampleFigures judge_drawn(const Sampler& sample, double guidance) {
        auto classes = static_cast<std::int64_t>(latents.classes.size());
        auto labels = torch::arange(classes, torch::kInt64).repeat_interleave(options.per_class);
        common::SampleOptions sampling;
        sampling.steps = options.sampling_steps;
        sampling.guidance = guidance;
        std::int64_t correct = 0;
        std::vector<torch::Tensor> features;
        for (std::int64_t begin = 0; begin < labels.size(0); begin += kBatch) {
            auto end = std::min(begin + kBatch, labels.size(0));
            sampling.seed = options.seed + static_cast<std::uint64_t>(begin);  // the same noise for every model
            auto asked = labels.slice(0, begin, end);
            auto images = judge_input(decoder->forward(sample(asked, sampling) / latents.scale_factor));
            correct += judge->forward(images).argmax(1).eq(asked).sum().item<std::int64_t>();
            features.push_back(judge->features(images));
        }
        SampleFigures figures;
        figures.cas = static_cast<double>(correct) / static_cast<double>(labels.size(0));
        figures.fid = frechet_distance(gaussian_stats(torch::cat(features)), real_stats);
        return figures;
    }

    // Decoded images (B, 1, S, S) in [-1, 1] → the judge's classes, from the centre crop of
    // the real images' size (the autoencoder pads 28×28 to 32×32 with background).
    torch::Tensor classify_decoded(const torch::Tensor& images) { return judge->forward(judge_input(images)).argmax(1); }

    common::Status measure_ceilings(const std::filesystem::path& pixels_dir, const common::DatasetManifest& pixels) {
        auto real = common::load_shard_file(pixels_dir / pixels.validation.file);
        if (!real) return common::with_context("real test images", real.error());
        auto test_latents = common::load_shard_file(options.latents / latents.validation.file);
        if (!test_latents) return common::with_context("test latents", test_latents.error());
        std::int64_t real_correct = 0, decoded_correct = 0;
        std::vector<torch::Tensor> real_features;
        for (std::int64_t begin = 0; begin < real->size(); begin += kBatch) {
            auto end = std::min(begin + kBatch, real->size());
            auto labels = real->labels.slice(0, begin, end);
            auto images = real->inputs.slice(0, begin, end);
            real_correct += judge->forward(images).argmax(1).eq(labels).sum().item<std::int64_t>();
            real_features.push_back(judge->features(images));
        }
        if (real->size() < 2) return common::make_error("the real test images are fewer than two: no FID");
        real_stats = gaussian_stats(torch::cat(real_features));
        for (std::int64_t begin = 0; begin < test_latents->size(); begin += kBatch) {
            auto end = std::min(begin + kBatch, test_latents->size());
            auto images = decoder->forward(test_latents->inputs.slice(0, begin, end) / latents.scale_factor);
            auto labels = test_latents->labels.slice(0, begin, end);
            decoded_correct += classify_decoded(images).eq(labels).sum().item<std::int64_t>();
        }
        ceilings.real_images = static_cast<double>(real_correct) / static_cast<double>(real->size());
        ceilings.reconstructed = static_cast<double>(decoded_correct) / static_cast<double>(test_latents->size());
        return {};
    }
};

SampleJudge::SampleJudge(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SampleJudge::~SampleJudge() = default;
const JudgeCeilings& SampleJudge::ceilings() const { return impl_->ceilings; }

common::Result<std::unique_ptr<SampleJudge>> SampleJudge::make(const JudgeOptions& options) {
    auto pixels = common::load_dataset_manifest(options.pixels / "dataset.json");
    if (!pixels) return common::with_context("judge data", pixels.error());
    if (pixels->kind != "pixels")
        return common::make_error("judge data " + options.pixels.string() + " is not a pixel dataset");
    auto latents = common::load_dataset_manifest(options.latents / "dataset.json");
    if (!latents) return latents.error();
    if (latents->decoder.file.empty())
        return common::make_error("the latent dataset has no decoder to draw samples with");
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->latents = *latents;
    try {
        torch::NoGradGuard no_grad;
        if (auto status = common::load_state_file(*impl->decoder, options.latents / latents->decoder.file); !status)
            return common::with_context("decoder", status.error());
        auto images = [&] { return common::load_training_set(options.pixels, *pixels); };
        if (auto status = load_or_fit_judge_cnn(impl->judge, images, recipe_of(options, *pixels), options.cache,
                                                "judge", options.quiet);
            !status)
            return common::with_context("judge", status.error());
        impl->judge->eval();
        impl->decoder->eval();
        if (auto status = impl->measure_ceilings(options.pixels, *pixels); !status) return status.error();
    } catch (const c10::Error& error) {
        return common::make_error(std::string("judge: ") + error.what_without_backtrace());
    }
    return std::unique_ptr<SampleJudge>(new SampleJudge(std::move(impl)));
}

common::Result<double> SampleJudge::score(const std::string& model, const common::NamedTensors& weights,
                                          double guidance) {
    auto measured = figures(model, weights, guidance);
    if (!measured) return measured.error();
    return measured->cas;
}

common::Result<SampleFigures> SampleJudge::figures(const std::string& model, const common::NamedTensors& weights,
                                                   double guidance) {
    try {
        torch::NoGradGuard no_grad;
        auto workload = common::make_workload(model, shape_of(impl_->latents), 0);
        if (!workload) return workload.error();
        auto* dit = common::dit_of(**workload);
        if (dit == nullptr) return common::make_error("model " + model + " does not generate images");
        if (auto status = common::load_state(*(*workload)->module(), common::from_named_f32(weights)); !status)
            return status.error();
        (*dit)->eval();
        return impl_->judge_drawn(
            [&](const torch::Tensor& labels, const common::SampleOptions& sampling) {
                return common::euler_sample(*dit, common::DitCondition{labels, {}, {}}, sampling);
            },
            guidance);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("scoring samples: ") + error.what_without_backtrace());
    }
}

common::Result<SampleFigures> SampleJudge::routed_figures(const std::string& expert_model,
                                                          const std::vector<const common::NamedTensors*>& experts,
                                                          const common::NamedTensors& router, const std::string& rule,
                                                          const common::ClusterManifest& clusters, double guidance) {
    auto group = RoutedGroup::load(expert_model, shape_of(impl_->latents), experts, router, rule, clusters);
    if (!group) return group.error();
    try {
        torch::NoGradGuard no_grad;
        return impl_->judge_drawn(
            [&](const torch::Tensor& labels, const common::SampleOptions& sampling) {
                return (*group)->sample(common::DitCondition{labels, {}, {}}, sampling);
            },
            guidance);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("scoring routed samples: ") + error.what_without_backtrace());
    }
}

common::Result<std::vector<double>> score_by_guidance(SampleJudge& judge, const std::string& model,
                                                      const common::NamedTensors& weights,
                                                      const std::vector<double>& guidances) {
    std::vector<double> shares;
    for (double guidance : guidances) {
        auto share = judge.score(model, weights, guidance);
        if (!share) return share.error();
        shares.push_back(*share);
    }
    return shares;
}

common::Status score_run(SampleJudge& judge, const std::string& model, const common::NamedTensors& weights,
                         const std::vector<double>& guidances, RunResult& run) {
    auto shares = score_by_guidance(judge, model, weights, guidances);
    if (!shares) return shares.error();
    run.sample_accuracy_by_guidance = *shares;
    run.sample_accuracy = shares->empty() ? -1 : shares->front();
    return {};
}

}  // namespace tessera::bench
