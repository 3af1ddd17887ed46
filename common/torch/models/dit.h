// A latent diffusion transformer of the DiT / PixArt-α family: 2×2 patches, adaLN-single
// timestep conditioning (one shared modulation MLP plus a learned table per block), a 3×3
// depthwise conv inside each MLP (as in the AT-1 latent transformer), and a zero-initialised
// output layer. Predicts the rectified-flow velocity. Conditioned either on a class (an
// embedding added to the timestep's, with a null class for classifier-free guidance) or, as
// PixArt-α, on a caption: its token embeddings pass a two-layer projection and every block
// cross-attends to them, masked by the caption's length; a learned null caption stands in for
// dropped captions and for the unconditional branch of guidance.
// Patch masking (MicroDiT's deferred masking, forward_kept): the first `mixer_depth` blocks
// mix all tokens, the rest and the output layer see only the tokens a sample keeps.
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
    // > 0: a text model (no class embedding) over caption tokens this wide.
    std::int64_t text_dim = 0;
    std::int64_t null_caption_tokens = 8;  // the learned null caption's length (text models)
    // Patch masking: the first this many blocks (the patch mixer) see every token; the blocks
    // after them see the kept tokens only. No parameters of its own.
    std::int64_t mixer_depth = 2;
};

// What a DiT is conditioned on: class labels, or a caption (token embeddings and lengths).
struct DitCondition {
    torch::Tensor labels;    // (B,) int64; num_classes is the null class (class models)
    torch::Tensor text;      // (B, L, text_dim) float (text models)
    torch::Tensor text_len;  // (B,) int64 in [1, L]: tokens past it are padding; undefined: all L
};

// One transformer block; its modulation comes from the shared adaLN-single projection.
class DitBlockImpl : public torch::nn::Module {
public:
    explicit DitBlockImpl(const DitConfig& config);
    // x: (B, N, H); t6: (B, 6, H); caption: (B, L, H) projected caption tokens, or undefined
    // (class models); caption_mask: (B, 1, 1, L) bool, true where a token is attended. keep:
    // undefined (x holds every token of the grid), or (B, K) i64, the grid positions of x's K
    // tokens, ascending.
    torch::Tensor forward(torch::Tensor x, const torch::Tensor& t6, const torch::Tensor& caption,
                          const torch::Tensor& caption_mask, const torch::Tensor& keep = {});

private:
    torch::Tensor self_attention(const torch::Tensor& x);
    torch::Tensor cross_attention(const torch::Tensor& x, const torch::Tensor& caption, const torch::Tensor& mask);
    torch::Tensor mlp(const torch::Tensor& x, const torch::Tensor& keep);

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
    // x: (B, C, S, S) noisy latents; t: (B,) in [0, 1]. Returns the velocity, like x.
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition);
    // Patch masking: the velocity of the kept patches only, (B, K, P) in the order of `keep`
    // (B, K) i64 (token positions, ascending); the blocks after the mixer see those K tokens.
    torch::Tensor forward_kept(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                               const torch::Tensor& keep);
    // (B, C, S, S) → (B, N, P) patches, token n = gy·G + gx (docs/protocol.md, "Model presets").
    torch::Tensor patchify(const torch::Tensor& x) const;
    const DitConfig& config() const { return config_; }
    bool takes_text() const { return config_.text_dim > 0; }

    // The condition with the rows where `drop` (B,) bool is true made unconditional: the null
    // class, or the learned null caption (all its tokens attended). Captions are padded to the
    // longer of their own length and the null caption's.
    DitCondition dropped(const DitCondition& condition, const torch::Tensor& drop) const;
    // The unconditional condition for a batch of `rows`, on `device`.
    DitCondition unconditional(std::int64_t rows, torch::Device device) const;

private:
    // The output layer's patch tokens: (B, N, P), or (B, K, P) for the kept tokens.
    torch::Tensor tokens_out(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                             const torch::Tensor& keep);
    torch::Tensor unpatchify(const torch::Tensor& tokens) const;

    DitConfig config_;
    torch::nn::Linear patch_embed_{nullptr};
    torch::nn::Linear t_fc1_{nullptr}, t_fc2_{nullptr}, t_block_{nullptr};
    torch::nn::Embedding class_embed_{nullptr};               // class models
    torch::nn::Linear caption_fc1_{nullptr}, caption_fc2_{nullptr};  // text models
    torch::Tensor null_caption_;                                      // text models: (null tokens, text_dim)
    torch::nn::ModuleList blocks_;
    torch::nn::LayerNorm norm_final_{nullptr};
    torch::nn::Linear out_{nullptr};
    torch::Tensor final_table_;
    torch::Tensor pos_embed_;  // fixed 2-D sin-cos, a buffer
};
TORCH_MODULE(Dit);

}  // namespace tessera::common
