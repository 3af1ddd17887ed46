// The local trainer a volunteer runs for one work unit: H AdamW steps from θ0 on the work
// unit's shards, returning Δ = θ_H − θ0 and metrics. Pure LibTorch, no networking, so it
// builds wherever LibTorch does. One call per thread.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "../lr_schedule.h"
#include "../protocol.h"
#include "../result.h"
#include "rectified_flow.h"
#include "shard_data.h"
#include "tensor_convert.h"
#include "workload.h"

namespace tessera::common {

// An inner optimizer kept from one work unit to the next (as DiLoCo's workers keep theirs):
// the AdamW moments of every parameter by name, f32, and the step count they share.
struct InnerOptimizerState {
    TorchTensorMap exp_avg, exp_avg_sq;
    std::int64_t steps = 0;
    bool empty() const { return exp_avg.empty(); }
};

struct TrainConfig {
    std::int64_t steps = 100;  // H
    std::int64_t batch_size = 64;
    std::int64_t micro_batch = 0;  // > 0: accumulate gradients over micro-batches of this size
    double lr = 3e-4;
    std::int64_t warmup_steps = 0;  // linear warm-up of the learning rate
    double weight_decay = 0.0;
    double grad_clip = 1.0;  // max global gradient norm; 0 = off
    std::uint64_t seed = 0;
    std::string device = "cpu";  // "cpu", "cuda", "cuda:N" or "auto"
    std::int64_t num_classes = 10;
    double caption_drop = kDefaultCaptionDrop;  // text DiTs: the rate at which captions drop to the null caption
    double patch_mask = 0;  // DiTs: the fraction of each sample's patches dropped after the mixer, in [0, 1)
    // > 0: `snapshot` is shown the weights (on the training device) after every this many
    // steps; the fleet simulator's central baseline draws its curve from them.
    std::int64_t snapshot_every = 0;
    std::function<void(std::int64_t step, const TorchTensorMap& weights)> snapshot;
    // Kept optimizer: the unit starts from these moments (nullptr or empty: fresh), which are
    // left as they are, and with return_optimizer its own end up in TrainOutcome::optimizer.
    const InnerOptimizerState* resume_optimizer = nullptr;
    bool return_optimizer = false;
    // Update clipping (MultiTensorAdamW::set_update_clipping): units that keep the optimizer
    // (`optimizer: kept`) use it, since kept second moments can be stale for the model a unit
    // starts from.
    bool clip_updates = false;
    // On a CUDA device with LibTorch 2.x, AdamW's fused kernel (MultiTensorAdamW::set_fused);
    // false: the _foreach steps, for the benchmark's comparison.
    bool fused_adamw = true;
    // One schedule over the whole run (lr_schedule.h): step s trains at
    // lr·lr_factor(schedule, unit_position(schedule_from, schedule_to, s, steps), batch), times
    // the per-unit warm-up factor.
    std::optional<LrSchedule> schedule;
    std::int64_t schedule_from = 0;
    std::int64_t schedule_to = 0;
    // Shown every step's learning rate (0-based step).
    std::function<void(std::int64_t step, double lr)> on_lr;
};

struct TrainStats {
    double loss_start = 0;  // mean loss over the first tenth of the steps
    double loss_end = 0;    // mean loss over the last tenth
    std::int64_t samples = 0;
    double seconds = 0;
    double samples_per_s = 0;
};

struct TrainOutcome {
    TorchTensorMap delta;  // θ_H − θ0, f32, on the training device
    TrainStats stats;
    std::vector<double> step_losses;  // every step's training loss, in order
    InnerOptimizerState optimizer;  // with return_optimizer: the moments after the last step, on the CPU
};

// Reported every few steps (losses are read from the device in groups) and after the last.
struct StepProgress {
    std::int64_t step = 0;  // 1-based
    std::int64_t steps = 0;
    double loss = 0;
    double samples_per_s = 0;
};
using ProgressCallback = std::function<void(const StepProgress&)>;

// The inner loop a work unit asks for (steps, batch, learning rate, warm-up, weight decay,
// clipping, seed); device, classes and the rest keep their defaults.
TrainConfig train_config_for(const Hyperparameters& hyper);

// "auto" picks cuda:0 when LibTorch sees a GPU, else the CPU.
Result<torch::Device> parse_device(const std::string& text);

// Rows of a unit's data (`size` rows) that train() visits in its first epoch: the permutation
// of the unit's BatchOrder stream for epoch 0 (unit_random.h), cut to the steps that epoch
// covers, and of those the last `max_rows`. A validator re-derives them to measure a delta's
// effect on the samples it was trained on.
torch::Tensor first_epoch_rows(std::int64_t size, std::int64_t batch_size, std::int64_t steps, std::uint64_t seed,
                               std::int64_t max_rows);

Result<TrainOutcome> train(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                           const TrainConfig& config, const ProgressCallback& progress = {});

// The classes a model was built for, from its class embedding (one extra row: "no class"), or a
// router's experts from its head; 10 for a model without either.
std::int64_t classes_of(const TorchTensorMap& theta0);

// The loss train() computes at its first step (at θ0, on the first batch of the unit's order
// with step 0's draws), without training: the first loss a unit's commitments report, which a
// validator recomputes exactly (docs/protocol.md, "Commitments"). One forward pass.
Result<double> opening_loss(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                            const TrainConfig& config);

}  // namespace tessera::common
