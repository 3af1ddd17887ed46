// The training loop. AdamW starts fresh for a unit unless the caller keeps the optimizer
// between units (TrainConfig::resume_optimizer): DiLoCo's workers keep theirs across rounds,
// although each round starts from a new outer model (arXiv 2311.08105).
#include "trainer.h"

#include <torch/torch.h>

#include <chrono>

#include "adamw.h"
#include "cuda_autocast.h"
#include "model_state.h"
#include "unit_draws.h"

namespace tessera::common {
namespace {

// Step `step`'s learning rate: the task's lr, times the run's schedule when the unit carries
// one, times a linear warm-up over warmup_steps within the unit. The warm-up protects AdamW's
// first steps from zero moments (full-size whatever the gradient), so it applies under a
// schedule too; a unit that resumes kept moments has warmup_steps 0.
UnitRate unit_rate_of(const TrainConfig& config) {
    return {config.schedule, config.schedule_from, config.schedule_to, config.steps, config.batch_size,
            config.warmup_steps};
}

double learning_rate(const TrainConfig& config, std::int64_t step) {
    return config.lr * step_lr_share(unit_rate_of(config), step);
}

// The kept moments in the optimizer's parameter order (the module's named_parameters order).
Status resume_optimizer(MultiTensorAdamW& optimizer, torch::nn::Module& module, const InnerOptimizerState& state) {
    std::vector<AdamWMoments> moments;
    for (const auto& item : module.named_parameters()) {
        auto avg = state.exp_avg.find(item.key());
        auto avg_sq = state.exp_avg_sq.find(item.key());
        if (avg == state.exp_avg.end() || avg_sq == state.exp_avg_sq.end())
            return make_error("the kept optimizer state has no moments for parameter '" + item.key() + "'");
        if (avg->second.sizes() != item.value().sizes() || avg_sq->second.sizes() != item.value().sizes())
            return make_error("the kept optimizer state's moments of '" + item.key() + "' have another shape");
        moments.push_back({avg->second, avg_sq->second, state.steps});
    }
    if (moments.size() != state.exp_avg.size() || moments.size() != state.exp_avg_sq.size())
        return make_error("the kept optimizer state has moments of parameters the model does not have");
    return optimizer.load_moments(std::move(moments));
}

Result<InnerOptimizerState> kept_optimizer(const MultiTensorAdamW& optimizer, torch::nn::Module& module) {
    InnerOptimizerState state;
    auto moments = optimizer.moments();
    std::size_t i = 0;
    for (const auto& item : module.named_parameters()) {
        const auto& m = moments.at(i++);
        if (i == 1) state.steps = m.steps;
        if (m.steps != state.steps || !m.exp_avg.defined())
            return make_error("parameter '" + item.key() + "' took " + std::to_string(m.steps) + " optimizer steps, " +
                              "the others " + std::to_string(state.steps) + ": no shared state to keep");
        state.exp_avg.emplace(item.key(), m.exp_avg.to(torch::kCPU, torch::kFloat32));
        state.exp_avg_sq.emplace(item.key(), m.exp_avg_sq.to(torch::kCPU, torch::kFloat32));
    }
    return state;
}

double mean(const std::vector<double>& values, std::size_t begin, std::size_t end) {
    double total = 0;
    for (auto i = begin; i < end; ++i) total += values[i];
    return end > begin ? total / static_cast<double>(end - begin) : 0.0;
}

// Losses stay on the device and are read this many steps at a time: reading one makes the
// host wait for the GPU, which would otherwise run ahead of it.
constexpr std::int64_t kLossReadEvery = 10;

// The global gradient norm clipped to `max_norm` without reading it back on the host (LibTorch's
// clip_grad_norm_ returns the norm as a double, a synchronisation per step). Same arithmetic as
// PyTorch's clip_grad_norm_: every gradient times min(1, max_norm / (norm + 1e-6)).
void clip_gradients(const std::vector<torch::Tensor>& parameters, double max_norm) {
    std::vector<torch::Tensor> norms;
    for (const auto& p : parameters)
        if (p.grad().defined()) norms.push_back(p.grad().norm());
    if (norms.empty()) return;
    auto total = (norms.size() == 1 ? norms[0] : torch::stack(norms).norm()).to(torch::kFloat64);
    auto coefficient = torch::clamp_max(max_norm / (total + 1e-6), 1.0);  // in double, as LibTorch's
    for (const auto& p : parameters)
        if (p.grad().defined()) p.grad().mul_(coefficient);
}

// The batch's rows: the data lives on the training device, the order comes from the unit's
// BatchOrder stream, epoch by epoch (so every device trains on the same samples), one index
// copy per epoch.
class BatchOrder {
public:
    BatchOrder(std::int64_t size, std::int64_t batch, torch::Device device, std::uint64_t seed)
        : size_(size), batch_(batch), device_(device), seed_(seed) {
        shuffle();
    }
    torch::Tensor next() {
        if (cursor_ + batch_ > size_) shuffle();  // next epoch: a fresh permutation
        auto rows = order_.slice(0, cursor_, cursor_ + std::min(batch_, size_));
        cursor_ += batch_;
        return rows;
    }

private:
    void shuffle() {
        order_ = unit_permutation_tensor(seed_, epoch_++, size_).to(device_);
        cursor_ = 0;
    }
    std::int64_t size_, batch_;
    torch::Device device_;
    std::uint64_t seed_;
    std::int64_t epoch_ = 0;
    torch::Tensor order_;
    std::int64_t cursor_ = 0;
};

Status check_training_inputs(const ShardData& data, const TrainConfig& config) {
    if (config.steps < 1 || config.batch_size < 1) return make_error("steps and batch size must be at least 1");
    if (data.size() < 1) return make_error("no training samples");
    auto largest_label = data.labels.max().item<std::int64_t>();
    if (largest_label >= config.num_classes)
        return make_error("label " + std::to_string(largest_label) + " is not below the task's " +
                          std::to_string(config.num_classes) + " classes");
    return {};
}

// One step's gradients, accumulated over micro-batches of `micro` rows of the batch's `rows`;
// the step's loss (f64, on the device, not read yet).
torch::Tensor accumulate_gradients(Workload& workload, const Batch& batch, std::int64_t rows, std::int64_t micro,
                                   bool cuda) {
    torch::Tensor step_loss;
    CastCache casts;
    for (std::int64_t begin = 0; begin < rows; begin += micro) {
        auto end = std::min(rows, begin + micro);
        auto weight = static_cast<double>(end - begin) / static_cast<double>(rows);
        torch::Tensor loss;
        {
            CudaAutocast autocast(cuda);
            loss = workload.loss(batch.slice(begin, end));
        }
        (loss * weight).backward();
        auto weighted = loss.detach().to(torch::kFloat64) * weight;
        step_loss = step_loss.defined() ? step_loss + weighted : weighted;
    }
    return step_loss;
}

// A unit's samples on the training device. Its shards are a few MB: they move once, not a
// batch at a time.
struct DeviceSamples {
    DeviceSamples(const ShardData& data, torch::Device device)
        : inputs(moved(data.inputs, device)), labels(moved(data.labels, device)),
          text_tokens(moved(data.text_tokens, device)), text_start(moved(data.text_start, device)),
          text_len(moved(data.text_len, device)) {}
    Batch at(const torch::Tensor& index) const {
        auto rows = [&](const torch::Tensor& all) { return all.defined() ? all.index_select(0, index) : torch::Tensor(); };
        PaddedCaptions captions;
        if (text_tokens.defined()) captions = pad_captions(text_tokens, text_start, text_len, index);
        return {rows(inputs), rows(labels), captions.text, captions.len, {}};
    }
    static torch::Tensor moved(const torch::Tensor& all, torch::Device device) {
        return all.defined() ? all.to(device) : all;
    }
    torch::Tensor inputs, labels, text_tokens, text_start, text_len;
};

// Steps done, the last loss read and the samples per second since `started`.
void report_progress(const ProgressCallback& progress, std::int64_t steps_done, std::int64_t steps, double loss,
                     std::int64_t rows, std::chrono::steady_clock::time_point started) {
    double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    progress({steps_done, steps, loss, elapsed > 0 ? static_cast<double>(steps_done * rows) / elapsed : 0.0});
}

// The step losses not read yet, read in one transfer from the device.
void read_losses(std::vector<torch::Tensor>& pending, std::vector<double>& losses) {
    auto read = torch::stack(pending).cpu();
    for (std::int64_t i = 0; i < read.numel(); ++i) losses.push_back(read[i].item<double>());
    pending.clear();
}

TorchTensorMap current_weights(torch::nn::Module& module) {
    torch::NoGradGuard no_grad;
    TorchTensorMap weights;
    for (const auto& item : module.named_parameters()) weights.emplace(item.key(), item.value().detach());
    return weights;
}

// The unit's delta (θ − θ0, f32) and its loss figures; an error when the loss left the finite.
Result<TrainOutcome> outcome_of(torch::nn::Module& module, const TorchTensorMap& theta0,
                                const std::vector<double>& losses, std::int64_t samples, double seconds) {
    TrainOutcome outcome;
    torch::NoGradGuard no_grad;
    for (const auto& item : module.named_parameters()) {
        auto theta_h = item.value().detach().to(torch::kFloat32);
        outcome.delta.emplace(item.key(), theta_h - theta0.at(item.key()).to(theta_h.device(), torch::kFloat32));
    }
    auto tenth = std::max<std::size_t>(1, losses.size() / 10);
    outcome.stats.loss_start = mean(losses, 0, tenth);
    outcome.stats.loss_end = mean(losses, losses.size() - tenth, losses.size());
    outcome.stats.samples = samples;
    outcome.stats.seconds = seconds;
    outcome.stats.samples_per_s = seconds > 0 ? static_cast<double>(samples) / seconds : 0.0;
    for (double loss : losses)
        if (!std::isfinite(loss)) return make_error("training diverged: the loss became non-finite");
    outcome.step_losses = losses;
    return outcome;
}

// The preset's workload for the unit: its caption drop and patch mask set.
Result<std::unique_ptr<Workload>> configured_workload(const std::string& preset, const ShardData& data,
                                                      const TrainConfig& config) {
    auto workload = make_workload(preset, data_shape_of(data, config.num_classes), config.seed);
    if (!workload) return workload.error();
    (*workload)->set_caption_drop(config.caption_drop);
    if (!(config.patch_mask >= 0 && config.patch_mask < 1)) return make_error("patch mask must be in [0, 1)");
    if (config.patch_mask > 0 && dit_of(**workload) == nullptr)
        return make_error("patch masking needs a DiT preset: " + preset + " has no patches");
    (*workload)->set_patch_mask(config.patch_mask);
    return workload;
}

Result<TrainOutcome> run_training(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                                  const TrainConfig& config, const ProgressCallback& progress) {
    auto device = parse_device(config.device);
    if (!device) return device.error();
    if (auto checked = check_training_inputs(data, config); !checked) return checked.error();
    auto workload = configured_workload(preset, data, config);
    if (!workload) return workload.error();
    auto module = (*workload)->module();
    if (auto loaded = load_state(*module, theta0); !loaded) return loaded.error();
    module->to(*device);
    module->train();

    bool cuda = device->is_cuda();
    DeviceSamples samples(data, *device);

    auto parameters = module->parameters();
    MultiTensorAdamW optimizer(parameters, config.weight_decay);
    optimizer.set_update_clipping(config.clip_updates);
    optimizer.set_fused(config.fused_adamw);
    if (config.resume_optimizer != nullptr && !config.resume_optimizer->empty())
        if (auto resumed = resume_optimizer(optimizer, *module, *config.resume_optimizer); !resumed)
            return resumed.error();
    auto micro = config.micro_batch > 0 ? std::min(config.micro_batch, config.batch_size) : config.batch_size;

    std::vector<double> losses;
    std::vector<torch::Tensor> pending;  // step losses not yet read
    BatchOrder order(data.size(), config.batch_size, *device, config.seed);
    std::int64_t rows = std::min(config.batch_size, data.size());
    auto started = std::chrono::steady_clock::now();
    for (std::int64_t step = 0; step < config.steps; ++step) {
        const double lr = learning_rate(config, step);
        if (config.on_lr) config.on_lr(step, lr);
        auto index = order.next();
        auto batch = samples.at(index);
        (*workload)->draw(batch, config.seed, step);
        optimizer.zero_grad();
        pending.push_back(accumulate_gradients(**workload, batch, rows, micro, cuda));
        if (config.grad_clip > 0) clip_gradients(parameters, config.grad_clip);
        optimizer.step(lr);
        if (config.snapshot && config.snapshot_every > 0 && (step + 1) % config.snapshot_every == 0)
            config.snapshot(step + 1, current_weights(*module));
        if (static_cast<std::int64_t>(pending.size()) == kLossReadEvery || step + 1 == config.steps) {
            read_losses(pending, losses);
            if (progress) report_progress(progress, step + 1, config.steps, losses.back(), rows, started);
        }
    }
    if (cuda) torch::cuda::synchronize();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    auto outcome = outcome_of(*module, theta0, losses, config.steps * rows, seconds);
    if (!outcome) return outcome.error();
    if (config.return_optimizer) {
        auto kept = kept_optimizer(optimizer, *module);
        if (!kept) return kept.error();
        outcome->optimizer = std::move(*kept);
    }
    return outcome;
}

}  // namespace

TrainConfig train_config_for(const Hyperparameters& hyper) {
    TrainConfig config;
    config.steps = hyper.local_steps;
    config.batch_size = hyper.batch_size;
    config.lr = hyper.lr;
    config.warmup_steps = hyper.warmup_steps;
    config.weight_decay = hyper.weight_decay;
    config.grad_clip = hyper.grad_clip;
    config.seed = static_cast<std::uint64_t>(hyper.seed);
    config.clip_updates = hyper.optimizer == InnerOptimizer::Kept;
    config.schedule = hyper.schedule;
    config.schedule_from = hyper.schedule_from;
    config.schedule_to = hyper.schedule_to;
    config.caption_drop = hyper.caption_drop.value_or(kDefaultCaptionDrop);
    config.patch_mask = hyper.patch_mask;
    return config;
}

torch::Tensor first_epoch_rows(std::int64_t size, std::int64_t batch_size, std::int64_t steps, std::uint64_t seed,
                               std::int64_t max_rows) {
    auto order = unit_permutation_tensor(seed, 0, size);
    // A batch larger than the data takes every row at each step; otherwise the epoch ends
    // before a batch would run past the end (BatchOrder::next).
    auto visited = batch_size >= size ? size : std::min(steps, size / batch_size) * batch_size;
    // The epoch's last rows: trained on most recently.
    return order.slice(0, std::max<std::int64_t>(0, visited - std::max<std::int64_t>(0, max_rows)), visited);
}

Result<torch::Device> parse_device(const std::string& text) {
    if (text == "auto")
        return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    try {
        torch::Device device(text);
        if (device.is_cuda() && !torch::cuda::is_available())
            return make_error("device " + text + " asked for, but this LibTorch sees no CUDA GPU");
        if (device.is_cuda() && device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count()))
            return make_error("device " + text + " does not exist (" + std::to_string(torch::cuda::device_count()) +
                              " GPUs)");
        if (!device.is_cpu() && !device.is_cuda()) return make_error("unsupported device " + text);
        return device;
    } catch (const c10::Error&) {
        return make_error("cannot parse device \"" + text + "\" (use auto, cpu or cuda:N)");
    }
}

Result<TrainOutcome> train(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                           const TrainConfig& config, const ProgressCallback& progress) {
    try {
        return run_training(preset, theta0, data, config, progress);
    } catch (const c10::Error& error) {
        return make_error(std::string("training failed: ") + error.what_without_backtrace());
    }
}

std::int64_t classes_of(const TorchTensorMap& theta0) {
    if (auto it = theta0.find("class_embed.weight"); it != theta0.end()) return it->second.size(0) - 1;
    if (auto it = theta0.find("router_head.weight"); it != theta0.end()) return it->second.size(0);
    return 10;
}

Result<double> opening_loss(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                            const TrainConfig& config) {
    try {
        auto device = parse_device(config.device);
        if (!device) return device.error();
        if (auto checked = check_training_inputs(data, config); !checked) return checked.error();
        auto workload = configured_workload(preset, data, config);
        if (!workload) return workload.error();
        auto module = (*workload)->module();
        if (auto loaded = load_state(*module, theta0); !loaded) return loaded.error();
        module->to(*device);
        module->train();  // as the first step runs
        torch::NoGradGuard no_grad;
        DeviceSamples samples(data, *device);
        auto batch = samples.at(BatchOrder(data.size(), config.batch_size, *device, config.seed).next());
        (*workload)->draw(batch, config.seed, 0);
        CastCache casts;
        CudaAutocast autocast(device->is_cuda());
        return (*workload)->loss(batch).to(torch::kFloat64).item<double>();
    } catch (const c10::Error& error) {
        return make_error(std::string("the opening loss: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::common
