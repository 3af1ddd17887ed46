// AdamW over all parameters at once, with LibTorch's multi-tensor (_foreach) operations: a
// handful of kernel launches per step where torch::optim::AdamW launches about ten for every
// parameter tensor — on a GPU, launches rather than arithmetic bound a small model's step.
// The update is torch::optim::AdamW's (decoupled weight decay, bias correction, no amsgrad);
// on the CPU it gives the same bits. On a CUDA device with LibTorch 2.x it is LibTorch's fused
// kernel (_fused_adamw_: one launch for the whole update), the same update to float rounding. Its moments can be taken out and put back, so that a
// volunteer's optimizer carries on across work units. Not thread-safe; one per training run.
#pragma once

#include <torch/types.h>

#include <map>
#include <vector>

#include "../result.h"

namespace tessera::common {

// One parameter's moments: undefined tensors and 0 steps before its first step.
struct AdamWMoments {
    torch::Tensor exp_avg, exp_avg_sq;
    std::int64_t steps = 0;
};

class MultiTensorAdamW {
public:
    explicit MultiTensorAdamW(std::vector<torch::Tensor> parameters, double weight_decay = 0.0, double beta1 = 0.9,
                              double beta2 = 0.999, double eps = 1e-8);

    // Update clipping (StableAdamW, Wortsman et al. 2023, arXiv 2304.13013): each tensor's
    // step is divided by max(1, RMS(g² / max(v̂, ε²))), the RMS over its elements of the
    // squared gradient against the bias-corrected second moment. It binds only when the
    // gradients outgrow what the second moment has seen — as when moments kept from an
    // earlier work unit meet a model the server has moved — and costs launches per tensor.
    void set_update_clipping(bool on) { update_clipping_ = on; }
    // Whether a CUDA step may use the fused kernel (on by default; off: the _foreach steps).
    void set_fused(bool on) { fused_ = on; }

    // Drops the gradients (the next backward allocates them afresh).
    void zero_grad();
    // One step at learning rate `lr`; a parameter without a gradient is left as it is.
    void step(double lr);

    // Copies of every parameter's moments, in the constructor's order.
    std::vector<AdamWMoments> moments() const;
    // Continues from `moments`, one per parameter in the constructor's order, each of its
    // parameter's shape (copied to its device and dtype). A mismatch is an error naming the
    // parameter's index, and leaves the optimizer as it was.
    Status load_moments(std::vector<AdamWMoments> moments);

private:
    bool step_fused(double lr);

    std::vector<torch::Tensor> parameters_;
    std::vector<AdamWMoments> moments_;
    // The fused kernel's step counts, one float on each parameter's device (made from
    // moments_[i].steps when first needed, dropped when moments are loaded).
    std::vector<torch::Tensor> device_steps_;
    double weight_decay_, beta1_, beta2_, eps_;
    bool update_clipping_ = false;
    bool fused_ = true;
};

}  // namespace tessera::common
