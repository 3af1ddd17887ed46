// The router of decentralized experts (McAllister et al., arXiv 2501.05450; Paris, arXiv
// 2510.03434): a small classifier of (x_t, t) → which data cluster x_t was noised from, whose
// softmax weighs the experts' velocities at sampling time. A DiT trunk conditioned on t alone
// (adaLN-single, no class or caption), its tokens mean-pooled, a LayerNorm and a linear head to
// one logit per expert.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "dit.h"

namespace tessera::common {

class RouterImpl : public torch::nn::Module {
public:
    // config.num_classes is the number of experts; text_dim is ignored (the router reads x_t).
    explicit RouterImpl(const DitConfig& config);
    // x: (B, C, S, S) noisy latents; t: (B,) in [0, 1]. Returns the logits (B, experts).
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& t);
    std::int64_t experts() const { return config_.num_classes; }

private:
    DitConfig config_;
    torch::nn::Linear patch_embed_{nullptr};
    torch::nn::Linear t_fc1_{nullptr}, t_fc2_{nullptr}, t_block_{nullptr};
    torch::nn::ModuleList blocks_;
    torch::nn::LayerNorm norm_{nullptr};
    torch::nn::Linear head_{nullptr};
    torch::Tensor pos_embed_;  // fixed 2-D sin-cos, a buffer
};
TORCH_MODULE(Router);

}  // namespace tessera::common
