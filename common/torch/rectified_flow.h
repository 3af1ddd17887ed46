// Rectified flow for the DiT workload: x_t = (1−t)·x0 + t·ε, the model predicts v = ε − x0,
// t ~ logit-normal(0, 1) in training; sampling integrates from t = 1 (noise) to t = 0 with
// Euler steps and classifier-free guidance.
#pragma once

#include <cstdint>

#include <torch/types.h>

#include "models/dit.h"

namespace tessera::common {

constexpr double kLabelDropout = 0.1;

// The random draws of one training batch: t ~ logit-normal, ε, and which labels drop out.
// Drawn for a whole batch before it is split into micro-batches, so accumulation over
// micro-batches computes the same loss as the whole batch. They come from the unit's
// specified streams (unit_random.h) for the step: t = sigmoid(z) with z the Timestep stream's
// normals, ε the Noise stream's, a label dropped where the LabelDrop stream's uniform < 0.1.
struct FlowDraws {
    torch::Tensor t;      // (B,)
    torch::Tensor noise;  // like x0
    torch::Tensor drop;   // (B,) bool
};

// The draws of training step `step` of the unit seeded `seed`, on x0's device.
FlowDraws draw_flow(const torch::Tensor& x0, std::uint64_t seed, std::int64_t step);

// Training loss: labels in `drop` become the null class (and their text is zeroed).
torch::Tensor flow_matching_loss(Dit& model, const torch::Tensor& x0, const torch::Tensor& labels,
                                 const torch::Tensor& text_emb, const FlowDraws& draws);

// Loss at fixed t values with fixed noise: comparable across model versions.
torch::Tensor flow_matching_loss_at(Dit& model, const torch::Tensor& x0, const torch::Tensor& labels,
                                    const torch::Tensor& text_emb, const torch::Tensor& t, const torch::Tensor& noise);
// The same, per sample: (B,) mean squared errors.
torch::Tensor flow_matching_sample_losses_at(Dit& model, const torch::Tensor& x0, const torch::Tensor& labels,
                                    const torch::Tensor& text_emb, const torch::Tensor& t, const torch::Tensor& noise);

struct SampleOptions {
    std::int64_t steps = 30;
    double guidance = 3.0;  // 1 = no guidance
    std::uint64_t seed = 0;
};

// Generates latents (B, C, S, S) for `labels` (B,), on the model's device.
torch::Tensor euler_sample(Dit& model, const torch::Tensor& labels, const SampleOptions& options);

}  // namespace tessera::common
