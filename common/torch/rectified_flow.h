// Rectified flow for the DiT workload: x_t = (1−t)·x0 + t·ε, the model predicts v = ε − x0,
// t ~ logit-normal(0, 1) in training; sampling integrates from t = 1 (noise) to t = 0 with
// Euler steps and classifier-free guidance.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "models/dit.h"

namespace tessera::common {

// A class model's labels drop to the null class at this rate (the unit's LabelDrop stream).
constexpr double kLabelDropout = 0.1;
// A text model's captions drop to the null caption at the task's rate, by default this
// (PixArt-α's; the unit's CaptionDrop stream, `hyper.caption_drop`).
constexpr double kDefaultCaptionDrop = 0.1;

// The random draws of one training batch: t ~ logit-normal, ε, and which conditions drop
// out. Drawn for a whole batch before it is split into micro-batches, so accumulation over
// micro-batches computes the same loss as the whole batch. They come from the unit's
// specified streams (unit_random.h) for the step: t = sigmoid(z) with z the Timestep stream's
// normals, ε the Noise stream's, a label dropped where the LabelDrop stream's uniform < 0.1 (a
// class model) or a caption where the CaptionDrop stream's uniform < the caption drop rate.
struct FlowDraws {
    torch::Tensor t;      // (B,)
    torch::Tensor noise;  // like x0
    torch::Tensor drop;   // (B,) bool
    // Patch masking: (B, K) i64, the tokens each sample keeps (the PatchMask stream); undefined: off.
    torch::Tensor keep;
};

// What a model's condition drops to the unconditional one by: labels at kLabelDropout, or
// captions at a task's rate.
struct ConditionDrop {
    bool captions = false;
    double rate = kLabelDropout;
};

// The draws of training step `step` of the unit seeded `seed`, on x0's device.
FlowDraws draw_flow(const torch::Tensor& x0, std::uint64_t seed, std::int64_t step, const ConditionDrop& drop = {});

// The tokens each sample of x0 (B, C, S, S) keeps at training step `step` when the fraction
// `ratio` in (0, 1) of its patches is dropped (kept_token_count, unit_kept_tokens), on x0's device.
torch::Tensor draw_kept_tokens(const Dit& model, const torch::Tensor& x0, std::uint64_t seed, std::int64_t step,
                               double ratio);

// Training loss: conditions in `drop` become unconditional (DitImpl::dropped). With kept tokens,
// the mean squared error over the kept patches' values only (DitImpl::forward_kept).
torch::Tensor flow_matching_loss(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                 const FlowDraws& draws);

// Loss at fixed t values with fixed noise: comparable across model versions.
torch::Tensor flow_matching_loss_at(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                    const torch::Tensor& t, const torch::Tensor& noise);
// The same, per sample: (B,) mean squared errors.
torch::Tensor flow_matching_sample_losses_at(Dit& model, const torch::Tensor& x0, const DitCondition& condition,
                                             const torch::Tensor& t, const torch::Tensor& noise);

struct SampleOptions {
    std::int64_t steps = 30;
    double guidance = 3.0;  // 1 = no guidance
    std::uint64_t seed = 0;
};

// Generates latents (B, C, S, S) for a condition of B rows (labels or captions), on the
// condition's device; guidance mixes in the unconditional velocity (DitImpl::unconditional).
torch::Tensor euler_sample(Dit& model, const DitCondition& condition, const SampleOptions& options);

// The Euler sampler's starting noise for `rows` latents of the model's shape, from the seed's
// CPU generator (the same on every device).
torch::Tensor sampling_noise(const DitConfig& config, std::int64_t rows, std::uint64_t seed, torch::Device device);
// The velocity with classifier-free guidance: v_u + g·(v_c − v_u) (g = 1: v_c alone).
torch::Tensor guided_velocity(Dit& model, const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                              const DitCondition& unconditional, double guidance);

// The rows of a condition.
std::int64_t condition_rows(const DitCondition& condition);

}  // namespace tessera::common
