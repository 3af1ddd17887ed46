// An expert group's grid, drawn through its router with LibTorch on the CPU.
#include "torch_group_samples.h"

#include <torch/torch.h>

#include "expert_group.h"
#include "gallery_grid.h"
#include "task_shape.h"
#include "torch/expert_sampling.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
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
            auto labels = torch::arange(grid_.classes, torch::kInt64).repeat_interleave(grid_.per_class);
            auto latents =
                common::euler_sample_experts(dits, router, {labels, {}, {}}, grid_.sampling, routing_.rule, evidence_);
            return common::images_to_png(decoder_->forward(latents / grid_.latent_scale), grid_.per_class);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("sampling the group: ") + error.what_without_backtrace());
        }
    }

private:
    std::vector<std::unique_ptr<common::Workload>> experts_;
    std::unique_ptr<common::Workload> router_;
    common::Decoder decoder_;
    common::GridOptions grid_;
    common::Routing routing_;
    torch::Tensor evidence_;  // undefined: the router alone
    ExpertWeightsNow weights_now_;
};

}  // namespace

std::optional<SampleRendererFactory> make_torch_group_renderer_factory(const TaskConfig& router,
                                                                       const TaskConfig& expert,
                                                                       const std::filesystem::path& decoder_file,
                                                                       double latent_scale, ExpertWeightsNow experts) {
    auto preset = common::find_preset(expert.model);
    if (!preset || preset->kind != common::ModelKind::Dit || expert.text_dim > 0) return std::nullopt;
    return [router, expert, decoder_file, latent_scale, experts]() -> common::Result<std::unique_ptr<SampleRenderer>> {
        try {
            auto routing = common::routing_from_name(default_group_routing(router));
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
            auto evidence = routing->prior == common::RoutingPrior::Class
                                ? common::class_evidence(router.expert_class_counts)
                                : torch::Tensor();
            return std::unique_ptr<SampleRenderer>(std::make_unique<TorchGroupRenderer>(
                std::move(models), std::move(*routing_model), std::move(decoder), grid, *routing, evidence, experts));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the group's sampler: ") + error.what_without_backtrace());
        }
    };
}

}  // namespace tessera::server
