// An expert group's grid, drawn through its router with LibTorch on the CPU.
#include "torch_group_samples.h"

#include <torch/torch.h>

#include <algorithm>

#include "expert_group.h"
#include "gallery_grid.h"
#include "task_shape.h"
#include "torch/expert_sampling.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch_model.h"

namespace tessera::server {
namespace {

class TorchGroupRenderer : public SampleRenderer {
public:
    TorchGroupRenderer(std::vector<std::unique_ptr<common::Workload>> experts, std::unique_ptr<common::Workload> router,
                       common::Decoder decoder, common::GridOptions grid, common::Routing routing,
                       torch::Tensor evidence, ExpertWeightsNow weights_now)
        : experts_(std::move(experts)), router_(std::move(router)), decoder_(std::move(decoder)), grid_(grid),
          routing_(routing), evidence_(std::move(evidence)), weights_now_(std::move(weights_now)) {}

    // `router_weights`: the router's version being drawn; the experts' newest weights with it.
    common::Result<common::Bytes> render(const common::NamedTensors& router_weights) override {
        auto weights = weights_now_();
        if (!weights) return common::with_context("the experts' weights", weights.error());
        if (weights->size() != experts_.size())
            return common::make_error("the group has " + std::to_string(weights->size()) + " experts, the router " +
                                      std::to_string(experts_.size()));
        try {
            torch::NoGradGuard no_grad;
            std::vector<common::Dit*> dits;
            for (std::size_t k = 0; k < experts_.size(); ++k) {
                auto status = common::load_state(*experts_[k]->module(), common::from_named_f32(*(*weights)[k]));
                if (!status) return common::with_context("expert " + std::to_string(k), status.error());
                dits.push_back(common::dit_of(*experts_[k]));
                (*dits.back())->eval();
            }
            auto status = common::load_state(*router_->module(), common::from_named_f32(router_weights));
            if (!status) return common::with_context("router", status.error());
            auto& router = *common::router_of(*router_);
            router->eval();
            decoder_->eval();
            auto latents =
                common::euler_sample_experts(dits, router, grid_condition(), grid_.sampling, routing_.rule, evidence_);
            return common::images_to_png(decoder_->forward(latents / grid_.latent_scale), grid_.per_class);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("sampling the group: ") + error.what_without_backtrace());
        }
    }

private:
    // A row per class, or per caption of a text group, of grid_.per_class samples.
    common::DitCondition grid_condition() const {
        if (!grid_.captions.text.defined())
            return {torch::arange(grid_.classes, torch::kInt64).repeat_interleave(grid_.per_class), {}, {}};
        return {{},
                grid_.captions.text.repeat_interleave(grid_.per_class, 0),
                grid_.captions.text_len.repeat_interleave(grid_.per_class, 0)};
    }

    std::vector<std::unique_ptr<common::Workload>> experts_;
    std::unique_ptr<common::Workload> router_;
    common::Decoder decoder_;
    common::GridOptions grid_;
    common::Routing routing_;
    torch::Tensor evidence_;  // undefined: the router alone
    ExpertWeightsNow weights_now_;
};

// The first `per_expert` validation captions of each expert's shard, padded to one length.
common::Result<common::DitCondition> expert_captions(const std::vector<std::filesystem::path>& shards,
                                                     std::int64_t per_expert) {
    std::vector<common::PaddedCaptions> parts;
    std::int64_t longest = 0;
    for (const auto& shard : shards) {
        auto data = common::load_shard_file(shard);
        if (!data) return common::with_context("validation captions", data.error());
        parts.push_back(data->slice(0, std::min(per_expert, data->size())).padded_captions());
        longest = std::max(longest, parts.back().text.size(1));
    }
    std::vector<torch::Tensor> texts, lengths;
    for (auto& part : parts) {
        texts.push_back(torch::constant_pad_nd(part.text, {0, 0, 0, longest - part.text.size(1)}));
        lengths.push_back(part.len);
    }
    return common::DitCondition{{}, torch::cat(texts), torch::cat(lengths)};
}

// What the rule adds to the router's logits: (E, classes) by the class, (rows, E) by the caption
// (a row per grid sample), undefined for the router alone.
torch::Tensor rule_evidence(common::RoutingPrior prior, const TaskConfig& router, const common::GridOptions& grid) {
    if (prior == common::RoutingPrior::Class) return common::class_evidence(router.expert_class_counts);
    if (prior == common::RoutingPrior::None) return {};
    const auto& clusters = router.expert_caption_clusters;
    auto pooled = common::pooled_captions(grid.captions.text, grid.captions.text_len);
    return common::caption_evidence(clusters.centres, clusters.sizes, clusters.inertia, pooled)
        .repeat_interleave(grid.per_class, 0);
}

}  // namespace

std::int64_t group_captions_per_expert(std::int64_t experts) {
    return std::max<std::int64_t>(1, kGalleryCaptions / std::max<std::int64_t>(1, experts));
}

std::optional<SampleRendererFactory> make_torch_group_renderer_factory(
    const TaskConfig& router, const TaskConfig& expert, const std::filesystem::path& decoder_file, double latent_scale,
    ExpertWeightsNow experts, std::vector<std::filesystem::path> caption_shards) {
    auto preset = common::find_preset(expert.model);
    if (!preset || preset->kind != common::ModelKind::Dit) return std::nullopt;
    if (expert.text_dim > 0 && caption_shards.size() != static_cast<std::size_t>(router.num_classes))
        return std::nullopt;
    return [router, expert, decoder_file, latent_scale, experts,
            caption_shards]() -> common::Result<std::unique_ptr<SampleRenderer>> {
        try {
            auto routing = common::routing_from_name(default_group_routing(router, expert));
            if (!routing) return routing.error();
            common::Decoder decoder;
            if (auto status = common::load_state_file(*decoder, decoder_file); !status)
                return common::with_context("decoder", status.error());
            std::vector<std::unique_ptr<common::Workload>> models;
            for (std::int64_t k = 0; k < router.num_classes; ++k) {
                auto workload = common::make_workload(expert.model, shape_of(expert), 0);
                if (!workload) return workload.error();
                models.push_back(std::move(*workload));
            }
            auto routing_model = common::make_workload(router.model, shape_of(router), 0);
            if (!routing_model) return routing_model.error();
            auto grid = gallery_grid(expert.num_classes, latent_scale);
            if (expert.text_dim > 0) {
                auto captions = expert_captions(caption_shards, group_captions_per_expert(router.num_classes));
                if (!captions) return captions.error();
                grid.captions = std::move(*captions);
            }
            auto evidence = rule_evidence(routing->prior, router, grid);
            return std::unique_ptr<SampleRenderer>(std::make_unique<TorchGroupRenderer>(
                std::move(models), std::move(*routing_model), std::move(decoder), grid, *routing, evidence, experts));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the group's sampler: ") + error.what_without_backtrace());
        }
    };
}

}  // namespace tessera::server
