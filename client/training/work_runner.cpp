// Work-unit training on LibTorch.
#include "work_runner.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <optional>

#include "bytes.h"
#include "file_io.h"
#include "optimizer_moments.h"
#include "safetensors.h"
#include "torch/device_delta.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/unit_commitments.h"
#include "training/gpu_memory.h"
#include "training/memory_fit.h"
#include "training/unit_inputs.h"
#include "zstd_codec.h"

#ifdef TESSERA_TORCH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::client {
namespace {

constexpr int kOomRetries = 4;
// The two micro-batches a GPU's memory is probed at (fewer rows when the batch is smaller).
constexpr std::int64_t kProbeSmall = 4;
constexpr std::int64_t kProbeLarge = 16;

bool is_out_of_memory(const std::string& message) { return message.find("out of memory") != std::string::npos; }

// AdamW's two moments of every parameter, in f32.
std::uint64_t moments_bytes(const common::TorchTensorMap& weights) {
    std::uint64_t values = 0;
    for (const auto& [name, tensor] : weights) values += static_cast<std::uint64_t>(tensor.numel());
    return 2 * values * sizeof(float);
}

// Micro-batches that trained without running out of memory, by model and batch size.
std::mutex fitted_mutex;
std::map<std::string, std::int64_t> fitted;

// 0: the whole batch fitted; none: no unit of the kind has trained here yet.
std::optional<std::int64_t> fitted_micro_batch(const std::string& key) {
    std::lock_guard lock(fitted_mutex);
    auto it = fitted.find(key);
    if (it == fitted.end()) return std::nullopt;
    return it->second;
}

void remember_micro_batch(const std::string& key, std::int64_t micro_batch) {
    std::lock_guard lock(fitted_mutex);
    fitted[key] = micro_batch;
}

void add_into(common::NamedTensors& into, const common::NamedTensors& from) {
    for (std::size_t t = 0; t < into.size(); ++t) {
        auto& values = into[t].values;
        const auto& added = from[t].values;
        for (std::size_t i = 0; i < values.size(); ++i) values[i] += added[i];
    }
}

// The residuals an upload's commitments name: what was added to the delta before encoding
// (r_in) and what the encoding left out (r_out), so that upload = Δ + r_in − r_out.
struct EncodedResiduals {
    common::NamedTensors in;
    common::NamedTensors out;
};

// The delta encoded as the unit asks (on a GPU the codec runs there and only the encoded
// bytes come back to the host). A unit that carries the residual has it added first (clipped
// to kMaxResidualRatio × the delta's norm), and the residual becomes what this encoding left
// out; a unit that holds it (a replica) is encoded alone, and what its encoding left out is
// added to the residual kept for later units.
common::Result<common::Bytes> encode_with_feedback(const common::WorkUnit& unit, common::TorchTensorMap& delta,
                                                   ErrorFeedback* feedback, std::string& note,
                                                   EncodedResiduals& residuals) {
    if (lossless(unit.encoding)) {
        if (feedback != nullptr) feedback->residual.clear();
        return common::encode_delta_on_device(delta, unit.encoding);
    }
    auto input = common::to_named_f32(delta);
    bool usable = feedback != nullptr && !feedback->residual.empty();
    if (usable) {
        auto mismatch = feedback_mismatch(*feedback, unit, input);
        if (!mismatch.empty()) note = "dropped the error-feedback residual: " + mismatch;
        usable = mismatch.empty();
    }
    if (usable && unit.encoding.carry_residual) {
        torch::NoGradGuard no_grad;
        double kept = clip_residual(feedback->residual, input);
        if (kept < 1.0) note = "scaled the carried residual by " + std::to_string(kept) + " to its bound";
        add_into(input, feedback->residual);
        for (const auto& carried : feedback->residual) {
            auto& tensor = delta.at(carried.name);
            tensor.add_(common::from_named_f32({carried}).at(carried.name).to(tensor.device()));
        }
        residuals.in = feedback->residual;
    }
    auto encoded = common::encode_delta_on_device(delta, unit.encoding);
    if (!encoded) return encoded.error();
    auto residual = residual_after(input, *encoded);
    if (!residual) return residual.error();
    residuals.out = *residual;
    if (feedback == nullptr) return encoded;
    if (usable && !unit.encoding.carry_residual) add_into(*residual, feedback->residual);
    *feedback = {unit.task_id, unit.model, std::move(residual).value()};
    return encoded;
}

// Whether the unit keeps the volunteer's optimizer moments; when it does and they are this
// task's and model's, `config` resumes from them (in `resumed`). Why they were dropped, in `note`.
bool resume_kept_moments(const common::WorkUnit& unit, const common::TorchTensorMap& theta0, const RunOptions& options,
                         common::TrainConfig& config, common::InnerOptimizerState& resumed, std::string& note) {
    // A fresh unit (a replica, or a task that does not keep state) neither reads nor
    // replaces the kept moments.
    if (options.optimizer == nullptr || unit.hyper.optimizer != common::InnerOptimizer::Kept) return false;
    if (moments_bytes(theta0) > kMaxOptimizerStateBytes) {
        note = "the model's optimizer state (" + std::to_string(moments_bytes(theta0) >> 20) +
               " MiB) is larger than the client keeps: fresh moments for every unit";
        *options.optimizer = {};
        return false;
    }
    config.return_optimizer = true;
    const auto& kept = *options.optimizer;
    if (!kept.empty() && kept.task_id == unit.task_id && kept.model == unit.model) {
        resumed = {common::from_named_f32(kept.exp_avg), common::from_named_f32(kept.exp_avg_sq), kept.steps};
        config.resume_optimizer = &resumed;
        config.warmup_steps = 0;  // the warm-up protects fresh moments; these are not
    } else if (!kept.empty()) {
        note = "dropped the kept optimizer state: it belongs to task " + kept.task_id + " (" + kept.model +
               "), this unit to task " + unit.task_id + " (" + unit.model + ")";
    }
    return true;
}

// An audit twin's moments (`unit.moments`, the file downloaded as `file`) into `config`, as the
// audited volunteer resumed them and the server's replay would: no warm-up.
common::Status resume_twin_moments(const std::filesystem::path& file, common::TrainConfig& config,
                                   common::InnerOptimizerState& resumed) {
    if (file.empty()) return common::make_error("the unit resumes moments it was not given");
    auto bytes = common::read_file(file, kMaxOptimizerStateBytes + (std::uint64_t{1} << 24));
    if (!bytes) return common::with_context("the moments to resume", bytes.error());
    auto moments = common::read_optimizer_moments(*bytes);
    if (!moments) return common::with_context("the moments to resume", moments.error());
    const auto& m = moments->moments;
    resumed = {common::from_named_f32(m.exp_avg), common::from_named_f32(m.exp_avg_sq), m.steps};
    config.resume_optimizer = &resumed;
    config.warmup_steps = 0;
    return {};
}

// On a GPU, the micro-batch its free memory holds, before any out-of-memory error: one
// training step as a warm-up (CUDA's handles and workspaces stay), then one at each of two
// small batches, each measured by the free memory it took (the caching allocator keeps what
// a step reserved until it is released). 0: the whole batch, or nothing could be measured.
std::int64_t micro_batch_from_free_memory(const std::string& model, const common::TorchTensorMap& theta0,
                                          const common::ShardData& data, const common::TrainConfig& config) {
    auto device = common::parse_device(config.device);
    auto small = std::min(config.batch_size, kProbeSmall), large = std::min(config.batch_size, kProbeLarge);
    if (!device || !device->is_cuda() || large <= small) return 0;
    std::int64_t available = -1;
    auto probe = [&](std::int64_t rows) -> std::optional<MemoryUse> {
        release_gpu_cache();
        auto before = gpu_bytes_available(*device);
        auto step = config;
        step.steps = 1;
        step.batch_size = rows;
        step.micro_batch = 0;
        step.snapshot_every = 0;
        step.snapshot = nullptr;
        step.on_lr = nullptr;
        step.return_optimizer = false;
        if (before < 0 || !common::train(model, theta0, data, step, {})) return std::nullopt;
        available = before;
        return MemoryUse{rows, before - gpu_bytes_available(*device)};
    };
    auto warm = probe(small);
    auto at_small = warm ? probe(small) : std::nullopt;
    auto at_large = at_small ? probe(large) : std::nullopt;
    release_gpu_cache();
    if (!at_large) return 0;
    return micro_batch_for_memory(*at_small, *at_large, available, config.batch_size);
}

// Trains the unit in the device's memory: an out-of-memory error halves the micro-batch and
// tries again (the micro-batch that fitted is remembered for the next unit of the kind), and
// kept moments that do not fit the model are dropped for fresh ones, saying why in `note`.
common::Result<common::TrainOutcome> train_fitting(const common::WorkUnit& unit, const common::TorchTensorMap& theta0,
                                                   const common::ShardData& data, common::TrainConfig& config,
                                                   const common::ProgressCallback& progress, std::string& note) {
    // The micro-batch that fitted this model and batch in the GPU's memory before is used
    // again, so only the first unit of a kind pays for finding it (from the free memory).
    auto fitted_key = unit.model + "/" + std::to_string(config.batch_size);
    auto fitted_before = fitted_micro_batch(fitted_key);
    config.micro_batch =
        fitted_before ? *fitted_before : micro_batch_from_free_memory(unit.model, theta0, data, config);
    auto outcome = common::train(unit.model, theta0, data, config, progress);
    for (int retry = 0; !outcome && is_out_of_memory(outcome.message()) && retry < kOomRetries; ++retry) {
        // Same batch, accumulated over micro-batches half as large each time.
        release_gpu_cache();
        config.micro_batch =
            std::max<std::int64_t>(1, (config.micro_batch > 0 ? config.micro_batch : config.batch_size) / 2);
        outcome = common::train(unit.model, theta0, data, config, progress);
    }
    if (!outcome && config.resume_optimizer != nullptr && !unit.moments && !is_out_of_memory(outcome.message())) {
        // Kept moments that do not fit the unit's model: train from fresh ones, and say why (a
        // twin's moments are the unit itself: no fall-back).
        auto why = outcome.message();
        config.resume_optimizer = nullptr;
        config.warmup_steps = unit.hyper.warmup_steps;
        outcome = common::train(unit.model, theta0, data, config, progress);
        if (outcome) note = "dropped the kept optimizer state: " + why;
    }
    if (outcome) remember_micro_batch(fitted_key, config.micro_batch);
    return outcome;
}

}  // namespace

common::Result<common::DeviceInfo> probe_device(const std::string& device, int threads) {
    auto parsed = common::parse_device(device);
    if (!parsed) return parsed.error();
    common::DeviceInfo info;
    info.threads = threads > 0 ? threads : torch::get_num_threads();
    if (parsed->is_cpu()) {
        info.kind = "cpu";
        info.name = "cpu";
        info.memory_bytes = static_cast<std::int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
        return info;
    }
    info.kind = "cuda";
    info.name = parsed->str();
#ifdef TESSERA_TORCH_CUDA
    cudaDeviceProp properties{};
    if (cudaGetDeviceProperties(&properties, parsed->has_index() ? parsed->index() : 0) != cudaSuccess)
        return common::make_error("cannot read the properties of " + parsed->str());
    info.name = properties.name;
    info.memory_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
#endif
    return info;
}

std::string describe_device(const std::string& device, int threads) {
    auto info = probe_device(device, threads);
    if (!info) return device + " (" + info.message() + ")";
    char memory[32];
    std::snprintf(memory, sizeof memory, "%.1f GiB", static_cast<double>(info->memory_bytes) / double(common::kGiB));
    if (info->kind == "cpu") return "cpu (" + std::to_string(info->threads) + " threads, " + memory + ")";
    auto parsed = common::parse_device(device);
    return parsed->str() + " (" + info->name + ", " + (info->memory_bytes > 0 ? memory : "memory unknown") + ")";
}

common::Result<RunOutput> run_work_unit(const common::WorkUnit& unit, const std::filesystem::path& model_file,
                                        const std::vector<std::filesystem::path>& shard_files,
                                        const RunOptions& options) {
    if (options.threads > 0) torch::set_num_threads(options.threads);
    auto device = common::parse_device(options.device);
    if (!device) return device.error();
    if (auto status = limit_gpu_memory(*device, options.max_gpu_memory_gb); !status) return status.error();
    auto theta0 = read_base_model(model_file);
    if (!theta0) return theta0.error();
    auto data = read_shards(shard_files);
    if (!data) return data.error();

    auto config = common::train_config_for(unit.hyper);
    config.device = options.device;
    config.num_classes = common::classes_of(*theta0);
    common::ProgressCallback progress;
    if (options.progress)
        progress = [&](const common::StepProgress& p) { options.progress(p.step, p.steps, p.loss, p.samples_per_s); };

    common::InnerOptimizerState resumed;
    std::string resumed_note;
    bool keeps_state = false;
    if (unit.moments) {
        if (auto status = resume_twin_moments(options.twin_moments, config, resumed); !status) return status.error();
    } else {
        keeps_state = resume_kept_moments(unit, *theta0, options, config, resumed, resumed_note);
    }
    common::CommitmentRecorder recorder(*theta0, config);
    recorder.attach(config);
    auto outcome = train_fitting(unit, *theta0, *data, config, progress, resumed_note);
    if (!outcome) return outcome.error();
    auto commitments = recorder.finish(*outcome);
    if (!commitments) return commitments.error();
    commitments->moments_in = common::moments_commitment(config.resume_optimizer);
    RunOutput output;
    output.optimizer_note = resumed_note;
    if (keeps_state)
        *options.optimizer = {unit.task_id, unit.model, outcome->optimizer.steps,
                              common::to_named_f32(outcome->optimizer.exp_avg),
                              common::to_named_f32(outcome->optimizer.exp_avg_sq)};
    EncodedResiduals residuals;
    auto encoded = encode_with_feedback(unit, outcome->delta, options.feedback, output.feedback_note, residuals);
    if (!encoded) return encoded.error();
    commitments->residual_in = common::residual_commitment(residuals.in, config.seed);
    commitments->residual_out = common::residual_commitment(residuals.out, config.seed);
    output.commitments = std::move(commitments).value();
    auto framed = common::zstd_compress(*encoded);
    if (!framed) return framed.error();
    const auto& s = outcome->stats;
    output.delta = std::move(framed).value();
    output.metrics = {s.loss_start, s.loss_end, s.samples, s.seconds, s.samples_per_s};
    output.device = describe_device(options.device, options.threads);
    return output;
}

}  // namespace tessera::client
