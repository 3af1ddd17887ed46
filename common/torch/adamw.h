// AdamW over all parameters at once, with LibTorch's multi-tensor (_foreach) operations: a
// handful of kernel launches per step where torch::optim::AdamW launches about ten for every
// parameter tensor — on a GPU, launches rather than arithmetic bound a small model's step.
// The update is torch::optim::AdamW's (decoupled weight decay, bias correction, no amsgrad);
// on the CPU it gives the same bits. Not thread-safe; one per training run.
#pragma once

#include <torch/types.h>

#include <map>
#include <vector>

namespace tessera::common {

class MultiTensorAdamW {
public:
    explicit MultiTensorAdamW(std::vector<torch::Tensor> parameters, double weight_decay = 0.0, double beta1 = 0.9,
                              double beta2 = 0.999, double eps = 1e-8);

    // Drops the gradients (the next backward allocates them afresh).
    void zero_grad();
    // One step at learning rate `lr`; a parameter without a gradient is left as it is.
    void step(double lr);

private:
    struct Moments {
        torch::Tensor exp_avg, exp_avg_sq;
        std::int64_t steps = 0;
    };
    std::vector<torch::Tensor> parameters_;
    std::vector<Moments> moments_;
    double weight_decay_, beta1_, beta2_, eps_;
};

}  // namespace tessera::common
