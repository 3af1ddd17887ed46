// CaptionJudge: decoded canvases read a quadrant at a time by two cached cnns.
#include "caption_judge.h"

#include <torch/torch.h>

#include <functional>
#include <iostream>

#include "canvas_shard.h"
#include "dataset_manifest.h"
#include "judge_cnn.h"
#include "routed_group.h"
#include "torch/model_state.h"
#include "torch/models/autoencoder.h"
#include "torch/models/cnn.h"
#include "torch/rectified_flow.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/workload.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kBatch = 250;   // canvases drawn, decoded and read at once
constexpr std::int64_t kQuadrants = 4;
constexpr std::int64_t kEmpty = 3;     // the attribute cnn's label of an empty quadrant (0–2: plain, dark, light)
constexpr std::uint64_t kHeldoutNoise = 1000003;  // the held-out captions' noise seeds start here

// (B, 1, 2S, 2S) canvases → (4B, 1, S, S) quadrants, canvas by canvas in quadrant order.
torch::Tensor quadrants_of(const torch::Tensor& canvases) {
    auto b = canvases.size(0), side = canvases.size(2) / 2;
    return canvases.view({b, 1, 2, side, 2, side}).permute({0, 2, 4, 1, 3, 5}).reshape({b * kQuadrants, 1, side, side});
}

common::DataShape shape_of(const common::DatasetManifest& manifest) {
    common::DataShape shape;
    shape.channels = manifest.sample_shape.at(0);
    shape.size = manifest.sample_shape.at(1);
    shape.num_classes = static_cast<std::int64_t>(manifest.classes.size());
    shape.text_dim = manifest.text_dim;
    return shape;
}

std::filesystem::path with_suffix(const std::filesystem::path& cache, const std::string& suffix) {
    return cache.parent_path() / (cache.filename().string() + suffix);
}

}  // namespace

struct CaptionJudge::Impl {
    CaptionJudgeOptions options;
    common::DatasetManifest manifest;
    common::Decoder decoder;
    common::Cnn classes, attributes;
    CanvasShard seen, heldout;  // the scored captions
    PromptFidelity ceilings;

    torch::Tensor decode(const torch::Tensor& latents) {
        return decoder->forward(latents / manifest.scale_factor);
    }

    // The decoded training canvases as the two cnns' images: each item quadrant labelled with
    // its noun (the class cnn) and every quadrant with its attribute or kEmpty (the attribute cnn).
    common::Status load_judge_images(common::ShardData& items, common::ShardData& quadrants) {
        std::vector<torch::Tensor> item_inputs, item_labels, all_inputs, all_labels;
        std::int64_t have = 0;
        for (const auto& file : manifest.train) {
            if (have >= options.train_canvases) break;
            auto shard = load_canvas_shard(options.data / file.file, options.train_canvases - have);
            if (!shard) return shard.error();
            for (std::int64_t begin = 0; begin < shard->size(); begin += kBatch) {
                auto end = std::min(begin + kBatch, shard->size());
                auto inputs = judge_input(quadrants_of(decode(shard->latents.slice(0, begin, end))));
                auto labels = torch::full({inputs.size(0)}, kEmpty, torch::kInt64);
                auto is_item = torch::zeros({inputs.size(0)}, torch::kBool);
                auto item_class = torch::zeros({inputs.size(0)}, torch::kInt64);
                for (std::int64_t i = begin; i < end; ++i) {
                    const auto& truth = shard->truth[static_cast<std::size_t>(i)];
                    const auto& where = shard->quadrants[static_cast<std::size_t>(i)];
                    for (int k = 0; k < 2; ++k) {
                        auto row = (i - begin) * kQuadrants + where[k];
                        labels[row] = truth.attributes[k];
                        item_class[row] = truth.classes[k];
                        is_item[row] = true;
                    }
                }
                all_inputs.push_back(inputs);
                all_labels.push_back(labels);
                item_inputs.push_back(inputs.index({is_item}));
                item_labels.push_back(item_class.index({is_item}));
            }
            have += shard->size();
        }
        if (have == 0) return common::make_error("the dataset lists no training canvases");
        items.inputs = torch::cat(item_inputs);
        items.labels = torch::cat(item_labels);
        quadrants.inputs = torch::cat(all_inputs);
        quadrants.labels = torch::cat(all_labels);
        return {};
    }

    // What the cnns read in each quadrant of decoded canvases.
    std::vector<std::array<QuadrantReading, 4>> read(const torch::Tensor& canvases) {
        auto inputs = judge_input(quadrants_of(canvases));
        auto nouns = static_cast<std::int64_t>(manifest.classes.size());  // of the cnn's 10 outputs
        auto item_class = classes->forward(inputs).slice(1, 0, nouns).argmax(1);
        auto attribute_logits = attributes->forward(inputs).slice(1, 0, kEmpty + 1);
        auto empty = torch::softmax(attribute_logits, 1).select(1, kEmpty);
        auto attribute = attribute_logits.slice(1, 0, kEmpty).argmax(1);
        std::vector<std::array<QuadrantReading, 4>> readings(static_cast<std::size_t>(canvases.size(0)));
        auto c = item_class.accessor<std::int64_t, 1>(), a = attribute.accessor<std::int64_t, 1>();
        auto e = empty.accessor<float, 1>();
        for (std::int64_t row = 0; row < inputs.size(0); ++row)
            readings[static_cast<std::size_t>(row / kQuadrants)][static_cast<std::size_t>(row % kQuadrants)] =
                QuadrantReading{c[row], a[row], e[row]};
        return readings;
    }

    // Counts of latents for a shard's captions, row by row.
    common::Result<FidelityCounts> count(const torch::Tensor& latents, const CanvasShard& shard) {
        if (latents.dim() != 4 || latents.size(0) != shard.size())
            return common::make_error("expected one latent per scored caption (" + std::to_string(shard.size()) + ")");
        FidelityCounts counts;
        for (std::int64_t begin = 0; begin < shard.size(); begin += kBatch) {
            auto end = std::min(begin + kBatch, shard.size());
            auto readings = read(decode(latents.slice(0, begin, end)));
            for (std::int64_t i = begin; i < end; ++i)
                counts.add(readings[static_cast<std::size_t>(i - begin)], shard.truth[static_cast<std::size_t>(i)]);
        }
        return counts;
    }

    // A model's latents for a batch of captions, drawn with the given options.
    using Sampler = std::function<torch::Tensor(const common::DitCondition&, const common::SampleOptions&)>;

    // Latents drawn by `sample` for a shard's captions, a batch at a time with fixed noise.
    torch::Tensor draw(const Sampler& sample, const CanvasShard& shard, double guidance, std::uint64_t noise) {
        common::SampleOptions sampling;
        sampling.steps = options.sampling_steps;
        sampling.guidance = guidance;
        std::vector<torch::Tensor> parts;
        for (std::int64_t begin = 0; begin < shard.size(); begin += kBatch) {
            auto end = std::min(begin + kBatch, shard.size());
            sampling.seed = noise + static_cast<std::uint64_t>(begin);  // the same noise for every model
            auto len = shard.text_len.slice(0, begin, end);
            auto text = shard.text.slice(0, begin, end).slice(1, 0, len.max().item<std::int64_t>());
            parts.push_back(sample(common::DitCondition{{}, text, len}, sampling));
        }
        return torch::cat(parts);
    }

    // The figures of what `sample` draws for the scored captions.
    common::Result<PromptFidelity> score_drawn(CaptionJudge& judge, const Sampler& sample, double guidance) {
        auto seen = draw(sample, this->seen, guidance, options.seed);
        auto held = draw(sample, heldout, guidance, options.seed + kHeldoutNoise);
        return judge.score_latents(seen, held);
    }
    // The class and attribute cnns, from the cache or fitted on the same decoded canvases (loaded
    // once, and only when one must be fitted).
    common::Status load_or_fit_cnns() {
        JudgeCnnRecipe recipe{options.epochs, options.seed,
                              "decoded canvases " + std::to_string(options.train_canvases) + " decoder " +
                                  manifest.decoder.sha256.substr(0, 12) + " shards "};
        for (const auto& file : manifest.train) recipe.data += file.sha256.substr(0, 12) + ",";
        common::ShardData items, quadrants;
        bool loaded = false;
        auto images = [&](bool of_items) -> common::Result<common::ShardData> {
            if (!loaded) {
                if (!options.quiet) std::cerr << "caption judge: decoding training canvases\n";
                if (auto status = load_judge_images(items, quadrants); !status) return status.error();
                loaded = true;
            }
            return of_items ? items : quadrants;
        };
        auto class_recipe = recipe, attribute_recipe = recipe;
        class_recipe.data += " class";
        attribute_recipe.data += " attribute";
        if (auto status = load_or_fit_judge_cnn(
                classes, [&] { return images(true); }, class_recipe, with_suffix(options.cache, "-class.safetensors"),
                "caption judge (class)", options.quiet);
            !status)
            return common::with_context("caption judge", status.error());
        if (auto status = load_or_fit_judge_cnn(
                attributes, [&] { return images(false); }, attribute_recipe,
                with_suffix(options.cache, "-attribute.safetensors"), "caption judge (attribute)", options.quiet);
            !status)
            return common::with_context("caption judge", status.error());
        classes->eval();
        attributes->eval();
        return {};
    }
};

CaptionJudge::CaptionJudge(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CaptionJudge::~CaptionJudge() = default;
const PromptFidelity& CaptionJudge::ceilings() const { return impl_->ceilings; }
const torch::Tensor& CaptionJudge::real_latents(bool heldout) const {
    return heldout ? impl_->heldout.latents : impl_->seen.latents;
}

common::Result<std::unique_ptr<CaptionJudge>> CaptionJudge::make(const CaptionJudgeOptions& options) {
    auto manifest = common::load_dataset_manifest(options.data / "dataset.json");
    if (!manifest) return manifest.error();
    if (manifest->text_dim <= 0 || manifest->heldout.file.empty() || manifest->decoder.file.empty())
        return common::make_error(options.data.string() +
                                  " is not a captioned canvases dataset (tessera-data prepare canvases): it needs "
                                  "captions, a held-out shard and a decoder");
    auto impl = std::make_unique<Impl>();
    impl->options = options;
    impl->manifest = *manifest;
    try {
        torch::NoGradGuard no_grad;
        if (auto status = common::load_state_file(*impl->decoder, options.data / manifest->decoder.file); !status)
            return common::with_context("decoder", status.error());
        impl->decoder->eval();
        auto seen = load_canvas_shard(options.data / manifest->validation.file, options.captions);
        if (!seen) return common::with_context("validation shard", seen.error());
        auto heldout = load_canvas_shard(options.data / manifest->heldout.file, options.captions);
        if (!heldout) return common::with_context("held-out shard", heldout.error());
        impl->seen = std::move(seen).value();
        impl->heldout = std::move(heldout).value();

        if (auto status = impl->load_or_fit_cnns(); !status) return status.error();
    } catch (const c10::Error& error) {
        return common::make_error(std::string("caption judge: ") + error.what_without_backtrace());
    }
    auto judge = std::unique_ptr<CaptionJudge>(new CaptionJudge(std::move(impl)));
    auto ceilings = judge->score_latents(judge->real_latents(false), judge->real_latents(true));
    if (!ceilings) return common::with_context("ceilings", ceilings.error());
    judge->impl_->ceilings = *ceilings;
    return judge;
}

common::Result<PromptFidelity> CaptionJudge::score_latents(const torch::Tensor& seen, const torch::Tensor& heldout) {
    try {
        torch::NoGradGuard no_grad;
        auto seen_counts = impl_->count(seen, impl_->seen);
        if (!seen_counts) return seen_counts.error();
        auto heldout_counts = impl_->count(heldout, impl_->heldout);
        if (!heldout_counts) return heldout_counts.error();
        return fidelity_of(*seen_counts, *heldout_counts);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("judging canvases: ") + error.what_without_backtrace());
    }
}

common::Result<PromptFidelity> CaptionJudge::score(const std::string& model, const common::NamedTensors& weights,
                                                   double guidance) {
    try {
        torch::NoGradGuard no_grad;
        auto workload = common::make_workload(model, shape_of(impl_->manifest), 0);
        if (!workload) return workload.error();
        auto* dit = common::dit_of(**workload);
        if (dit == nullptr) return common::make_error("model " + model + " does not generate images");
        if (auto status = common::load_state(*(*workload)->module(), common::from_named_f32(weights)); !status)
            return status.error();
        (*dit)->eval();
        return impl_->score_drawn(
            *this,
            [&](const common::DitCondition& condition, const common::SampleOptions& sampling) {
                return common::euler_sample(*dit, condition, sampling);
            },
            guidance);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("scoring captions: ") + error.what_without_backtrace());
    }
}

common::Result<PromptFidelity> CaptionJudge::routed_score(const std::string& expert_model,
                                                          const std::vector<const common::NamedTensors*>& experts,
                                                          const common::NamedTensors& router, const std::string& rule,
                                                          const common::ClusterManifest& clusters, double guidance) {
    auto group = RoutedGroup::load(expert_model, shape_of(impl_->manifest), experts, router, rule, clusters);
    if (!group) return group.error();
    try {
        torch::NoGradGuard no_grad;
        return impl_->score_drawn(
            *this,
            [&](const common::DitCondition& condition, const common::SampleOptions& sampling) {
                return (*group)->sample(condition, sampling);
            },
            guidance);
    } catch (const c10::Error& error) {
        return common::make_error(std::string("scoring routed captions: ") + error.what_without_backtrace());
    }
}

common::Status score_run_fidelity(CaptionJudge& judge, const std::string& model, const common::NamedTensors& weights,
                                  const std::vector<double>& guidances, RunResult& run) {
    run.fidelity_by_guidance.clear();
    for (double guidance : guidances) {
        auto fidelity = judge.score(model, weights, guidance);
        if (!fidelity) return fidelity.error();
        run.fidelity_by_guidance.push_back(*fidelity);
    }
    return {};
}

}  // namespace tessera::bench
