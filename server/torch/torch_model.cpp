// Version 0 and the validation probe, on the CPU with LibTorch.
#include "torch_model.h"

#include <torch/torch.h>

#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/workload.h"

namespace tessera::server {
namespace {

common::DataShape shape_of(const TaskConfig& config) {
    common::DataShape shape;
    shape.channels = config.sample_shape[0];
    shape.size = config.sample_shape[1];
    shape.num_classes = config.num_classes;
    shape.text_dim = config.text_dim;
    return shape;
}

class TorchProbe : public ModelProbe {
public:
    TorchProbe(std::unique_ptr<common::Workload> workload, std::shared_ptr<const common::ShardData> data)
        : workload_(std::move(workload)), data_(std::move(data)) {}

    common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples) override {
        try {
            torch::NoGradGuard no_grad;
            auto status = common::load_state(*workload_->module(), common::from_named_f32(weights));
            if (!status) return status.error();
            auto result = workload_->evaluate(*data_, torch::kCPU, max_samples);
            ProbeResult probe{result.loss, std::nullopt, result.samples};
            if (result.accuracy >= 0) probe.accuracy = result.accuracy;
            return probe;
        } catch (const c10::Error& error) {
            return common::make_error(std::string("evaluation: ") + error.what_without_backtrace());
        }
    }

private:
    std::unique_ptr<common::Workload> workload_;
    std::shared_ptr<const common::ShardData> data_;
};

constexpr std::int64_t kSamplesPerClass = 8;
constexpr std::int64_t kSamplingSteps = 20;
constexpr std::uint64_t kSamplingSeed = 1234;  // the same noise for every version

class TorchSampleRenderer : public SampleRenderer {
public:
    TorchSampleRenderer(std::unique_ptr<common::Workload> workload, common::Decoder decoder, common::GridOptions grid)
        : workload_(std::move(workload)), decoder_(std::move(decoder)), grid_(grid) {}

    common::Result<common::Bytes> render(const common::NamedTensors& weights) override {
        try {
            torch::NoGradGuard no_grad;
            auto status = common::load_state(*workload_->module(), common::from_named_f32(weights));
            if (!status) return status.error();
            return common::sample_png_grid(*workload_, decoder_, grid_);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("sampling: ") + error.what_without_backtrace());
        }
    }

private:
    std::unique_ptr<common::Workload> workload_;
    common::Decoder decoder_;
    common::GridOptions grid_;
};

}  // namespace

common::Result<common::NamedTensors> initial_weights(const TaskConfig& config) {
    try {
        auto workload =
            common::make_workload(config.model, shape_of(config), static_cast<std::uint64_t>(config.init_seed));
        if (!workload) return workload.error();
        return common::to_named_f32(common::state_of(*(*workload)->module()));
    } catch (const c10::Error& error) {
        return common::make_error(std::string("building the model: ") + error.what_without_backtrace());
    }
}

common::Result<ModelProbeFactory> make_torch_probe_factory(const TaskConfig& config,
                                                           const std::filesystem::path& validation_shard) {
    auto data = common::load_shard_file(validation_shard);
    if (!data) return common::with_context("validation shard", data.error());
    auto shared = std::make_shared<const common::ShardData>(std::move(*data));
    return ModelProbeFactory([config, shared]() -> common::Result<std::unique_ptr<ModelProbe>> {
        try {
            auto workload = common::make_workload(config.model, shape_of(config), 0);
            if (!workload) return workload.error();
            return std::unique_ptr<ModelProbe>(std::make_unique<TorchProbe>(std::move(*workload), shared));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the model: ") + error.what_without_backtrace());
        }
    });
}

std::optional<SampleRendererFactory> make_torch_sample_renderer_factory(const TaskConfig& config,
                                                                        const std::filesystem::path& decoder_file,
                                                                        double latent_scale) {
    auto preset = common::find_preset(config.model);
    if (!preset || preset->kind != common::ModelKind::Dit) return std::nullopt;
    return [config, decoder_file, latent_scale]() -> common::Result<std::unique_ptr<SampleRenderer>> {
        try {
            common::Decoder decoder;
            if (auto status = common::load_state_file(*decoder, decoder_file); !status)
                return common::with_context("decoder", status.error());
            auto workload = common::make_workload(config.model, shape_of(config), 0);
            if (!workload) return workload.error();
            common::GridOptions grid;
            grid.classes = config.num_classes;
            grid.per_class = kSamplesPerClass;
            grid.latent_scale = latent_scale;
            grid.sampling.steps = kSamplingSteps;
            grid.sampling.seed = kSamplingSeed;
            return std::unique_ptr<SampleRenderer>(
                std::make_unique<TorchSampleRenderer>(std::move(*workload), std::move(decoder), grid));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the sampler: ") + error.what_without_backtrace());
        }
    };
}

}  // namespace tessera::server
