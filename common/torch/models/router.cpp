// The experts' router: a t-conditioned DiT trunk, mean-pooled, to one logit per expert.
#include "router.h"

#include <torch/torch.h>

#include "dit_parts.h"

namespace tessera::common {

RouterImpl::RouterImpl(const DitConfig& c) : config_(c) {
    config_.text_dim = 0;
    auto patch_dim = c.patch * c.patch * c.in_channels;
    patch_embed_ = register_module("patch_embed", torch::nn::Linear(patch_dim, c.hidden));
    t_fc1_ = register_module("t_fc1", torch::nn::Linear(kTimestepFrequencies, c.hidden));
    t_fc2_ = register_module("t_fc2", torch::nn::Linear(c.hidden, c.hidden));
    t_block_ = register_module("t_block", torch::nn::Linear(c.hidden, 6 * c.hidden));
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.depth; ++i) blocks_->push_back(DitBlock(config_));
    norm_ = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.hidden}).eps(1e-6)));
    head_ = register_module("router_head", torch::nn::Linear(c.hidden, c.num_classes));
    pos_embed_ = register_buffer("pos_embed", sincos_position_embedding(c.hidden, c.input_size / c.patch));

    init_linear(patch_embed_);
    for (auto* layer : {&t_fc1_, &t_fc2_, &t_block_}) {
        torch::nn::init::normal_((*layer)->weight, 0.0, 0.02);
        torch::nn::init::zeros_((*layer)->bias);
    }
    torch::nn::init::normal_(head_->weight, 0.0, 0.02);
    torch::nn::init::zeros_(head_->bias);
}

torch::Tensor RouterImpl::forward(const torch::Tensor& x, const torch::Tensor& t) {
    auto tokens = linear(patch_embed_, patchify_latents(x, config_.patch)) + pos_embed_;
    auto c = linear(t_fc2_, torch::silu(linear(t_fc1_, timestep_features(t).to(tokens.dtype()))));
    auto t6 = linear(t_block_, torch::silu(c)).view({x.size(0), 6, config_.hidden});
    for (const auto& module : *blocks_) tokens = module->as<DitBlock>()->forward(tokens, t6, {}, {});
    return linear(head_, norm_(tokens.mean(1)));
}

}  // namespace tessera::common
