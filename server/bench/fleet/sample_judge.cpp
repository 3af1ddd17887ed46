// SampleJudge: a cnn trained on the real images scores decoded DiT samples.
#include "sample_judge.h"

#include <torch/torch.h>

#include <iostream>

#include "dataset_manifest.h"
#include "file_io.h"
#include "safetensors.h"
#include "torch/models/cnn.h"
#include "torch/models/autoencoder.h"
#include "torch/model_state.h"
#include "torch/rectified_flow.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/workload.h"
#include "bytes.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kBatch = 250;  // samples drawn and judged at once
constexpr std::int64_t kJudgeBatch = 64;
constexpr double kJudgeLr = 1e-3;
constexpr double kJudgeWeightDecay = 0.01;
constexpr const char* kRecipeKey = "judge_recipe";

// How the judge was made: a cache made any other way (or from other images) is not reused.
std::string recipe_of(const JudgeOptions& options, const common::DatasetManifest& pixels) {
    std::string recipe = "cnn epochs=" + std::to_string(options.epochs) + " batch=" + std::to_string(kJudgeBatch) +
                         " lr=" + std::to_string(kJudgeLr) + " wd=" + std::to_string(kJudgeWeightDecay) +
                         " seed=" + std::to_string(options.seed) + " train=";
    for (const auto& file : pixels.train) recipe += file.sha256.substr(0, 12) + ",";
    return recipe;
}

// The cached judge, when it exists, was made by `recipe` and loads.
bool load_cached_judge(torch::nn::Module& judge, const std::filesystem::path& cache, const std::string& recipe) {
    if (!std::filesystem::exists(cache)) return false;
    auto bytes = common::read_file(cache, 64 * common::kMiB);
    if (!bytes) return false;
    auto file = common::parse_safetensors(*bytes);
    if (!file) return false;
    auto made_by = file->metadata().find(kRecipeKey);
    if (made_by == file->metadata().end() || made_by->second != recipe) return false;
    auto state = common::to_torch_map(*file);
    return state && common::load_state(judge, *state);
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
    std::int64_t image_size = 28;  // the real images' side; decoded images are cropped to it
    common::Cnn judge;
    common::Decoder decoder;
    JudgeCeilings ceilings;

    // Fits the judge to the real training images from the cnn preset's seeded initial weights.
    common::Status train(const std::filesystem::path& pixels_dir, const common::DatasetManifest& pixels,
                         const std::string& recipe) {
        auto data = common::load_training_set(pixels_dir, pixels);
        if (!data) return data.error();
        auto workload = common::make_workload("cnn", shape_of(pixels), options.seed);
        if (!workload) return workload.error();
        common::TrainConfig train;
        train.batch_size = kJudgeBatch;
        train.steps = options.epochs * data->size() / train.batch_size;
        train.lr = kJudgeLr;
        train.weight_decay = kJudgeWeightDecay;
        train.seed = options.seed;
        train.num_classes = static_cast<std::int64_t>(pixels.classes.size());
        if (!options.quiet)
            std::cerr << "judge: training the cnn on " << data->size() << " real images for " << options.epochs
                      << " epochs\n";
        auto theta0 = common::state_of(*(*workload)->module());
        auto outcome = common::train("cnn", theta0, *data, train);
        if (!outcome) return outcome.error();
        common::TorchTensorMap trained;
        for (const auto& [name, value] : theta0) trained.emplace(name, value + outcome->delta.at(name));
        if (auto status = common::load_state(*judge, trained); !status) return status;
        auto bytes = common::to_safetensors(trained, {{kRecipeKey, recipe}});
        if (!bytes) return bytes.error();
        return common::write_file_atomic(options.cache, *bytes);
    }

    // Decoded images (B, 1, S, S) in [-1, 1] → the judge's classes, from the centre crop of
    // the real images' size (the autoencoder pads 28×28 to 32×32 with background).
    torch::Tensor classify_decoded(const torch::Tensor& images) {
        auto margin = (images.size(2) - image_size) / 2;
        auto crop = images.slice(2, margin, margin + image_size).slice(3, margin, margin + image_size);
        return judge->forward(common::standardise_pixels((crop.clamp(-1, 1) + 1) / 2)).argmax(1);
    }

    common::Status measure_ceilings(const std::filesystem::path& pixels_dir, const common::DatasetManifest& pixels) {
        auto real = common::load_shard_file(pixels_dir / pixels.validation.file);
        if (!real) return common::with_context("real test images", real.error());
        auto test_latents = common::load_shard_file(options.latents / latents.validation.file);
        if (!test_latents) return common::with_context("test latents", test_latents.error());
        std::int64_t real_correct = 0, decoded_correct = 0;
        for (std::int64_t begin = 0; begin < real->size(); begin += kBatch) {
            auto end = std::min(begin + kBatch, real->size());
            auto labels = real->labels.slice(0, begin, end);
            real_correct +=
                judge->forward(real->inputs.slice(0, begin, end)).argmax(1).eq(labels).sum().item<std::int64_t>();
        }
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
    impl->image_size = pixels->sample_shape.at(1);
    try {
        torch::NoGradGuard no_grad;
        if (auto status = common::load_state_file(*impl->decoder, options.latents / latents->decoder.file); !status)
            return common::with_context("decoder", status.error());
        auto recipe = recipe_of(options, *pixels);
        if (!load_cached_judge(*impl->judge, options.cache, recipe)) {
            torch::AutoGradMode training(true);
            if (auto status = impl->train(options.pixels, *pixels, recipe); !status)
                return common::with_context("judge", status.error());
        } else if (!options.quiet) {
            std::cerr << "judge: reusing " << options.cache.string() << "\n";
        }
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
    auto& o = impl_->options;
    try {
        torch::NoGradGuard no_grad;
        auto workload = common::make_workload(model, shape_of(impl_->latents), 0);
        if (!workload) return workload.error();
        auto* dit = common::dit_of(**workload);
        if (dit == nullptr) return common::make_error("model " + model + " does not generate images");
        if (auto status = common::load_state(*(*workload)->module(), common::from_named_f32(weights)); !status)
            return status.error();
        (*dit)->eval();
        auto classes = static_cast<std::int64_t>(impl_->latents.classes.size());
        auto labels = torch::arange(classes, torch::kInt64).repeat_interleave(o.per_class);
        common::SampleOptions sampling;
        sampling.steps = o.sampling_steps;
        sampling.guidance = guidance;
        std::int64_t correct = 0;
        for (std::int64_t begin = 0; begin < labels.size(0); begin += kBatch) {
            auto end = std::min(begin + kBatch, labels.size(0));
            sampling.seed = o.seed + static_cast<std::uint64_t>(begin);  // the same noise for every model
            auto asked = labels.slice(0, begin, end);
            auto latents = common::euler_sample(*dit, common::DitCondition{asked, {}, {}}, sampling);
            auto images = impl_->decoder->forward(latents / impl_->latents.scale_factor);
            correct += impl_->classify_decoded(images).eq(asked).sum().item<std::int64_t>();
        }
        return static_cast<double>(correct) / static_cast<double>(labels.size(0));
    } catch (const c10::Error& error) {
        return common::make_error(std::string("scoring samples: ") + error.what_without_backtrace());
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
