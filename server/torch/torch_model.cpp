// Version 0 and the validation probe, on the CPU with LibTorch.
#include "torch_model.h"

#include <torch/torch.h>

#include <cmath>

#include "torch/check_losses.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/unit_commitments.h"
#include "gallery_grid.h"
#include "shard_cache.h"
#include "task_shape.h"
#include "torch/workload.h"

namespace tessera::server {
namespace {

std::vector<double> to_vector(const torch::Tensor& values) {
    auto contiguous = values.to(torch::kFloat64).contiguous();
    const auto* data = contiguous.data_ptr<double>();
    return std::vector<double>(data, data + contiguous.numel());
}

class TorchProbe : public ModelProbe {
public:
    TorchProbe(std::unique_ptr<common::Workload> workload, std::shared_ptr<const common::ShardData> data,
               std::shared_ptr<ShardCache> shard_cache, std::string preset)
        : workload_(std::move(workload)), data_(std::move(data)), shard_cache_(std::move(shard_cache)),
          preset_(std::move(preset)) {}

    common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples) override {
        try {
            torch::NoGradGuard no_grad;
            auto status = common::load_state(*workload_->module(), common::from_named_f32(weights));
            if (!status) return status.error();
            workload_->set_eval_grid(common::EvalGrid::Full);  // the curve's, whatever a check set last
            auto result = workload_->evaluate(*data_, torch::kCPU, max_samples);
            ProbeResult probe{result.loss, std::nullopt, result.samples, to_vector(result.sample_losses)};
            if (result.accuracy >= 0) probe.accuracy = result.accuracy;
            return probe;
        } catch (const c10::Error& error) {
            return common::make_error(std::string("evaluation: ") + error.what_without_backtrace());
        }
    }

    common::Result<SampleLosses> check_losses(const common::NamedTensors& weights, std::int64_t max_samples,
                                              const std::vector<std::int64_t>& rows) override {
        try {
            return common::check_losses(*workload_, common::from_named_f32(weights), *data_, max_samples, rows);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("evaluation for a check: ") + error.what_without_backtrace());
        }
    }

    common::Result<std::vector<SampleLosses>> losses_on_assigned(const std::vector<const common::NamedTensors*>& weights,
                                                                 const AssignedSamples& samples) override {
        try {
            torch::NoGradGuard no_grad;
            auto data = unit_data(samples);
            if (!data) return data.error();
            auto rows = common::first_epoch_rows((*data)->size(), samples.batch_size, samples.steps, samples.seed,
                                                 samples.max_samples);
            auto chosen = (*data)->rows(rows);
            std::vector<SampleLosses> losses;
            for (const auto* w : weights) {
                auto loss =
                    common::check_losses(*workload_, common::from_named_f32(*w), chosen, chosen.size(), samples.rows);
                if (!loss) return loss.error();
                losses.push_back(std::move(*loss));
            }
            return losses;
        } catch (const c10::Error& error) {
            return common::make_error(std::string("evaluation on the unit's samples: ") +
                                      error.what_without_backtrace());
        }
    }

    common::Result<std::int64_t> held_out_rows() override { return data_->size(); }

    common::Result<std::int64_t> assigned_rows(const AssignedSamples& samples) override {
        try {
            auto data = unit_data(samples);
            if (!data) return data.error();
            return common::first_epoch_rows((*data)->size(), samples.batch_size, samples.steps, samples.seed,
                                            samples.max_samples)
                .size(0);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("the unit's samples: ") + error.what_without_backtrace());
        }
    }

    common::Result<double> opening_loss(const common::NamedTensors& base, const AssignedSamples& samples,
                                        const common::Hyperparameters& hyper) override {
        auto data = unit_data(samples);
        if (!data) return data.error();
        auto theta0 = common::from_named_f32(base);
        auto config = common::train_config_for(hyper);
        config.num_classes = common::classes_of(theta0);  // as the volunteer's trainer reads it
        return common::opening_loss(preset_, theta0, **data, config);
    }

    common::Result<common::Commitments> replay(const common::NamedTensors& base, const AssignedSamples& samples,
                                               const common::Hyperparameters& hyper,
                                               const ReplayMoments* moments) override {
        try {
            auto data = unit_data(samples);
            if (!data) return data.error();
            auto theta0 = common::from_named_f32(base);
            auto config = common::train_config_for(hyper);
            config.num_classes = common::classes_of(theta0);  // as the volunteer's trainer reads it
            common::InnerOptimizerState resumed;
            if (moments != nullptr) {  // as the reference client resumes them (no per-unit warm-up)
                resumed = {common::from_named_f32(moments->exp_avg), common::from_named_f32(moments->exp_avg_sq),
                           moments->steps};
                config.resume_optimizer = &resumed;
                config.warmup_steps = 0;
            }
            return common::replay_commitments(preset_, theta0, **data, config);
        } catch (const c10::Error& error) {
            return common::make_error(std::string("replaying the unit: ") + error.what_without_backtrace());
        }
    }

private:
    // The unit's shards (through the task's cache), concatenated where there are several; the
    // last unit's are kept (its replicas and retries repeat it).
    common::Result<const common::ShardData*> unit_data(const AssignedSamples& samples) {
        if (unit_data_ && samples.shards == unit_shards_) return unit_data_.get();
        std::vector<std::shared_ptr<const common::ShardData>> shards;
        for (const auto& sha256 : samples.shards) {
            auto shard = shard_cache_->get(sha256, samples.read_shard);
            if (!shard) return common::with_context("shard " + sha256, shard.error());
            shards.push_back(std::move(*shard));
        }
        if (shards.size() == 1) {
            unit_data_ = std::move(shards.front());
        } else {
            std::vector<common::ShardData> parts;
            for (const auto& shard : shards) parts.push_back(*shard);  // tensors shared, not copied
            auto data = common::concat_shards(parts);
            if (!data) return data.error();
            unit_data_ = std::make_shared<const common::ShardData>(std::move(*data));
        }
        unit_shards_ = samples.shards;
        return unit_data_.get();
    }

    std::unique_ptr<common::Workload> workload_;
    std::shared_ptr<const common::ShardData> data_;
    std::shared_ptr<ShardCache> shard_cache_;
    std::vector<std::string> unit_shards_;
    std::shared_ptr<const common::ShardData> unit_data_;
    std::string preset_;
};

constexpr std::uint64_t kCalibrationSeed = 1;
// A task with very long units is calibrated on a shorter one: its figures are per step.
constexpr std::int64_t kMaxCalibrationSteps = 100;

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
    auto shard_cache = std::make_shared<ShardCache>();
    return ModelProbeFactory([config, shared, shard_cache]() -> common::Result<std::unique_ptr<ModelProbe>> {
        try {
            auto workload = common::make_workload(config.model, shape_of(config), 0);
            if (!workload) return workload.error();
            return std::unique_ptr<ModelProbe>(
                std::make_unique<TorchProbe>(std::move(*workload), shared, shard_cache, config.model));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the model: ") + error.what_without_backtrace());
        }
    });
}

namespace {

// One unit of the calibration from `theta0`: its delta's norm and its gain on the samples it
// trained on, both per step at the full rate.
struct CalibrationUnit {
    common::TorchTensorMap after;
    double norm_per_step = 0;
    double gain_per_step = 0;
    std::int64_t steps = 0;
};

common::Result<CalibrationUnit> calibration_unit(const TaskConfig& config, const common::TorchTensorMap& theta0,
                                                 const common::ShardData& data, std::uint64_t seed) {
    auto hyper = inner_loop_of(config, std::min(config.local_steps, kMaxCalibrationSteps),
                               static_cast<std::int64_t>(seed));
    auto train = common::train_config_for(hyper);
    train.num_classes = config.num_classes;
    auto outcome = common::train(config.model, theta0, data, train);
    if (!outcome) return outcome.error();
    double squares = 0;
    CalibrationUnit unit;
    for (const auto& [name, delta] : outcome->delta) {
        squares += delta.to(torch::kFloat64).pow(2).sum().item<double>();
        unit.after.emplace(name, theta0.at(name) + delta);
    }
    auto rows = common::first_epoch_rows(data.size(), train.batch_size, train.steps, train.seed, config.check_samples);
    auto chosen = data.rows(rows);
    auto workload = common::make_workload(config.model, shape_of(config), 0);
    if (!workload) return workload.error();
    auto before = common::check_losses(**workload, theta0, chosen, chosen.size());
    if (!before) return before.error();
    auto after_losses = common::check_losses(**workload, unit.after, chosen, chosen.size());
    if (!after_losses) return after_losses.error();
    auto mean = [](const SampleLosses& losses) {
        double total = 0;
        for (double loss : losses) total += loss;
        return losses.empty() ? 0.0 : total / static_cast<double>(losses.size());
    };
    double before_loss = mean(*before), after_loss = mean(*after_losses);
    // Per step at the full rate, as the checks count a volunteer's steps.
    double steps = common::full_rate_steps(unit_rate_of(hyper));
    unit.steps = train.steps;
    unit.norm_per_step = std::sqrt(squares) / steps;
    unit.gain_per_step = before_loss > 0 ? (before_loss - after_loss) / before_loss / steps : 0.0;
    return unit;
}

}  // namespace

common::Result<Calibration> calibrate(const TaskConfig& config, const common::NamedTensors& weights,
                                      const std::filesystem::path& validation_shard) {
    try {
        auto data = common::load_shard_file(validation_shard);
        if (!data) return common::with_context("validation shard", data.error());
        auto theta0 = common::from_named_f32(weights);
        auto first = calibration_unit(config, theta0, *data, kCalibrationSeed);
        if (!first) return common::with_context("calibration unit", first.error());
        // The gain comes from a second unit, on the first one's weights: a fresh model's first
        // unit at the full rate crosses its initial transient (dit-tiny-text on canvases: the
        // loss falls 61 % in 10 steps), which no later unit repeats; honest units a few versions
        // on gained 6 x less per step, under a quarter of it (docs/operations.md, "Validation").
        auto second = calibration_unit(config, first->after, *data, kCalibrationSeed + 1);
        if (!second) return common::with_context("second calibration unit", second.error());
        Calibration calibration;
        calibration.steps = first->steps;
        calibration.norm_per_step = first->norm_per_step;
        calibration.first_gain_per_step = first->gain_per_step;
        calibration.gain_per_step = std::min(first->gain_per_step, second->gain_per_step);
        return calibration;
    } catch (const c10::Error& error) {
        return common::make_error(std::string("calibration: ") + error.what_without_backtrace());
    }
}

std::optional<SampleRendererFactory> make_torch_sample_renderer_factory(const TaskConfig& config,
                                                                        const std::filesystem::path& decoder_file,
                                                                        double latent_scale,
                                                                        const std::filesystem::path& validation_shard) {
    auto preset = common::find_preset(config.model);
    if (!preset || preset->kind != common::ModelKind::Dit) return std::nullopt;
    return [config, decoder_file, latent_scale,
            validation_shard]() -> common::Result<std::unique_ptr<SampleRenderer>> {
        try {
            common::Decoder decoder;
            if (auto status = common::load_state_file(*decoder, decoder_file); !status)
                return common::with_context("decoder", status.error());
            auto workload = common::make_workload(config.model, shape_of(config), 0);
            if (!workload) return workload.error();
            auto grid = gallery_grid(config.num_classes, latent_scale);
            if (config.text_dim > 0) {
                auto data = common::load_shard_file(validation_shard);
                if (!data) return common::with_context("validation captions", data.error());
                auto rows = std::min<std::int64_t>(kGalleryCaptions, data->size());
                auto captions = data->slice(0, rows).padded_captions();
                grid.captions = {{}, captions.text, captions.len};
            }
            return std::unique_ptr<SampleRenderer>(
                std::make_unique<TorchSampleRenderer>(std::move(*workload), std::move(decoder), grid));
        } catch (const c10::Error& error) {
            return common::make_error(std::string("building the sampler: ") + error.what_without_backtrace());
        }
    };
}

}  // namespace tessera::server
