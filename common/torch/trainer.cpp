// The training loop. AdamW state starts fresh for every work unit: the moments from the
// previous unit belong to an older base model (and often to another volunteer), and shipping
// them would double the traffic; DiLoCo's inner optimiser is reset the same way.
#include "trainer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <chrono>

#include "model_state.h"

namespace tessera::common {
namespace {

// LibTorch 2.4 replaced the CUDA-only autocast switches with per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
void set_cuda_autocast(bool enabled) {
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, enabled);
}
#else
void set_cuda_autocast(bool enabled) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(enabled);
}
#endif

// bf16 autocast on CUDA for the scope of a training step.
class CudaAutocast {
public:
    explicit CudaAutocast(bool enable) : enabled_(enable) {
        if (enabled_) set_cuda_autocast(true);
    }
    ~CudaAutocast() {
        if (!enabled_) return;
        set_cuda_autocast(false);
        at::autocast::clear_cache();
    }
    CudaAutocast(const CudaAutocast&) = delete;
    CudaAutocast& operator=(const CudaAutocast&) = delete;

private:
    bool enabled_;
};

double mean(const std::vector<double>& values, std::size_t begin, std::size_t end) {
    double total = 0;
    for (auto i = begin; i < end; ++i) total += values[i];
    return end > begin ? total / static_cast<double>(end - begin) : 0.0;
}

Result<TrainOutcome> run_training(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                                  const TrainConfig& config, const ProgressCallback& progress) {
    auto device = parse_device(config.device);
    if (!device) return device.error();
    if (config.steps < 1 || config.batch_size < 1) return make_error("steps and batch size must be at least 1");
    if (data.size() < 1) return make_error("no training samples");
    auto largest_label = data.labels.max().item<std::int64_t>();
    if (largest_label >= config.num_classes)
        return make_error("label " + std::to_string(largest_label) + " is not below the task's " +
                          std::to_string(config.num_classes) + " classes");
    auto workload = make_workload(preset, data_shape_of(data, config.num_classes), config.seed);
    if (!workload) return workload.error();
    auto module = (*workload)->module();
    if (auto loaded = load_state(*module, theta0); !loaded) return loaded.error();
    module->to(*device);
    module->train();

    bool cuda = device->is_cuda();
    auto inputs = cuda ? data.inputs.pin_memory() : data.inputs;
    auto labels = cuda ? data.labels.pin_memory() : data.labels;
    auto text = data.text_emb.defined() && cuda ? data.text_emb.pin_memory() : data.text_emb;

    auto generator = at::detail::createCPUGenerator(config.seed);
    torch::optim::AdamW optimizer(module->parameters(),
                                  torch::optim::AdamWOptions(config.lr).weight_decay(config.weight_decay));
    auto micro = config.micro_batch > 0 ? std::min(config.micro_batch, config.batch_size) : config.batch_size;

    std::vector<double> losses;
    auto order = torch::randperm(data.size(), generator, torch::kInt64);
    std::int64_t cursor = 0;
    auto started = std::chrono::steady_clock::now();
    for (std::int64_t step = 0; step < config.steps; ++step) {
        double warm = config.warmup_steps > 0 ? std::min(1.0, static_cast<double>(step + 1) / config.warmup_steps) : 1.0;
        for (auto& group : optimizer.param_groups())
            static_cast<torch::optim::AdamWOptions&>(group.options()).lr(config.lr * warm);
        if (cursor + config.batch_size > data.size()) {  // next epoch: a fresh permutation
            order = torch::randperm(data.size(), generator, torch::kInt64);
            cursor = 0;
        }
        auto index = order.slice(0, cursor, cursor + std::min(config.batch_size, data.size()));
        cursor += config.batch_size;
        Batch batch{inputs.index_select(0, index).to(*device, true), labels.index_select(0, index).to(*device, true),
                    text.defined() ? text.index_select(0, index).to(*device, true) : torch::Tensor(), {}};
        (*workload)->draw(batch, generator);

        optimizer.zero_grad();
        double step_loss = 0;
        auto rows = batch.inputs.size(0);
        for (std::int64_t begin = 0; begin < rows; begin += micro) {
            auto end = std::min(rows, begin + micro);
            auto weight = static_cast<double>(end - begin) / static_cast<double>(rows);
            torch::Tensor loss;
            {
                CudaAutocast autocast(cuda);
                loss = (*workload)->loss(batch.slice(begin, end));
            }
            (loss * weight).backward();
            step_loss += loss.item<double>() * weight;
        }
        if (config.grad_clip > 0) torch::nn::utils::clip_grad_norm_(module->parameters(), config.grad_clip);
        optimizer.step();
        losses.push_back(step_loss);
        if (progress) {
            double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            progress({step + 1, config.steps, step_loss,
                      elapsed > 0 ? static_cast<double>((step + 1) * rows) / elapsed : 0.0});
        }
    }
    if (cuda) torch::cuda::synchronize();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

    TrainOutcome outcome;
    torch::NoGradGuard no_grad;
    for (const auto& item : module->named_parameters())
        outcome.delta.emplace(item.key(), (item.value().detach().to(torch::kCPU, torch::kFloat32) -
                                           theta0.at(item.key()).to(torch::kFloat32)));
    auto tenth = std::max<std::size_t>(1, losses.size() / 10);
    outcome.stats.loss_start = mean(losses, 0, tenth);
    outcome.stats.loss_end = mean(losses, losses.size() - tenth, losses.size());
    outcome.stats.samples = config.steps * std::min(config.batch_size, data.size());
    outcome.stats.seconds = seconds;
    outcome.stats.samples_per_s = seconds > 0 ? static_cast<double>(outcome.stats.samples) / seconds : 0.0;
    for (double loss : losses)
        if (!std::isfinite(loss)) return make_error("training diverged: the loss became non-finite");
    return outcome;
}

}  // namespace

Result<torch::Device> parse_device(const std::string& text) {
    if (text == "auto") return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    try {
        torch::Device device(text);
        if (device.is_cuda() && !torch::cuda::is_available())
            return make_error("device " + text + " asked for, but this LibTorch sees no CUDA GPU");
        if (device.is_cuda() && device.has_index() && device.index() >= static_cast<int>(torch::cuda::device_count()))
            return make_error("device " + text + " does not exist (" + std::to_string(torch::cuda::device_count()) + " GPUs)");
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

}  // namespace tessera::common
