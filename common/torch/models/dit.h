// A latent diffusion transformer of the DiT / PixArt-α family: 2×2 patches, adaLN-single
// timestep conditioning (one shared modulation MLP plus a learned table per block), a class
// embedding with a null class for classifier-free guidance, optional cross-attention to text
// embeddings, a 3×3 depthwise conv inside each MLP (as in the AT-1 latent transformer), and a
// zero-initialised output layer. Predicts the rectified-flow velocity.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

namespace tessera::common {

struct DitConfig {
    std::int64_t hidden = 384;
    std::int64_t depth = 12;
    std::int64_t heads = 6;
    std::int64_t patch = 2;
    std::int64_t in_channels = 4;
    std::int64_t input_size = 8;    // latent height = width
    std::int64_t num_classes = 10;  // class index num_classes is the null (unconditional) class
    std::int64_t mlp_ratio = 4;
    std::int64_t text_dim = 0;  // > 0 adds cross-attention to text_emb tokens
};

// One transformer block; its modulation comes from the shared adaLN-single projection.
class DitBlockImpl : public torch::nn::Module {
public:
    explicit DitBlockImpl(const DitConfig& config);
    // x: (B, N, H); t6: (B, 6, H); text: (B, L, text_dim) or undefined.
    torch::Tensor forward(torch::Tensor x, const torch::Tensor& t6, const torch::Tensor& text);

private:
    torch::Tensor self_attention(const torch::Tensor& x);
    torch::Tensor cross_attention(const torch::Tensor& x, const torch::Tensor& text);
    torch::Tensor mlp(const torch::Tensor& x);

    std::int64_t hidden_, heads_, grid_;
    torch::nn::LayerNorm norm1_{nullptr}, norm2_{nullptr}, norm_cross_{nullptr};
    torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
    torch::nn::Linear cross_q_{nullptr}, cross_kv_{nullptr}, cross_proj_{nullptr};
    torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
    torch::nn::Conv2d dwconv_{nullptr};
    torch::Tensor scale_shift_table_;
};
TORCH_MODULE(DitBlock);

class DitImpl : public torch::nn::Module {
public:
    explicit DitImpl(const DitConfig& config);
    // x: (B, C, S, S) noisy latents; t: (B,) in [0, 1]; labels: (B,) int64 (num_classes =
    // unconditional); text: (B, L, text_dim) or undefined. Returns the velocity, like x.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& t, const torch::Tensor& labels,
                          const torch::Tensor& text = {});
    const DitConfig& config() const { return config_; }

private:
    torch::Tensor patchify(const torch::Tensor& x) const;
    torch::Tensor unpatchify(const torch::Tensor& tokens) const;

    DitConfig config_;
    torch::nn::Linear patch_embed_{nullptr};
    torch::nn::Linear t_fc1_{nullptr}, t_fc2_{nullptr}, t_block_{nullptr};
    torch::nn::Embedding class_embed_{nullptr};
    torch::nn::ModuleList blocks_;
    torch::nn::LayerNorm norm_final_{nullptr};
    torch::nn::Linear out_{nullptr};
    torch::Tensor final_table_;
    torch::Tensor pos_embed_;  // fixed 2-D sin-cos, a buffer
};
TORCH_MODULE(Dit);

}  // namespace tessera::common
