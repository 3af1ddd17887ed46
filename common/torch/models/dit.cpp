// DiT with adaLN-single (PixArt-α), conditioned on a class or on a caption.
#include "dit.h"

#include "dit_parts.h"

#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>
#include <limits>

namespace tessera::common {
namespace {

torch::nn::LayerNorm plain_norm(std::int64_t hidden) {
    return torch::nn::LayerNorm(torch::nn::LayerNormOptions({hidden}).elementwise_affine(false).eps(1e-6));
}

// x·(1 + scale) + shift, and x + gate·y below, as one fused pass each (addcmul) rather than a
// multiply and an add: on a GPU these elementwise passes, not the matmuls, bound the step.
torch::Tensor modulate(const torch::Tensor& x, const torch::Tensor& shift, const torch::Tensor& scale) {
    return torch::addcmul(shift, x, 1 + scale);
}

// softmax(q·kᵀ/√d)·v, where `mask` (broadcast to the scores; undefined: none) is true for the
// keys a query may attend. On a GPU with LibTorch 2 it is one fused kernel (flash or
// memory-efficient attention), which never holds the tokens × tokens scores; on the CPU it
// stays the plain product, so CPU results are the same on every LibTorch version.
torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const torch::Tensor& mask = {}) {
#if TORCH_VERSION_MAJOR >= 2
    if (q.is_cuda()) return at::scaled_dot_product_attention(q, k, v, mask);
#endif
    auto scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    auto scores = torch::matmul(q, k.transpose(-2, -1)) * scale;
    if (mask.defined()) scores = scores.masked_fill(mask.logical_not(), -std::numeric_limits<float>::infinity());
    return torch::softmax(scores, -1).matmul(v);
}

// (B, 1, 1, L) bool: true for the caption tokens a query attends (those before its length).
torch::Tensor caption_key_mask(const DitCondition& condition, std::int64_t tokens) {
    if (!condition.text_len.defined()) return {};
    auto positions = torch::arange(tokens, condition.text_len.options());
    return positions.unsqueeze(0).lt(condition.text_len.unsqueeze(1)).view({-1, 1, 1, tokens});
}

// Rows `keep` (B, K) of x (B, N, W): (B, K, W).
torch::Tensor gather_tokens(const torch::Tensor& x, const torch::Tensor& keep) {
    return x.gather(1, keep.unsqueeze(-1).expand({keep.size(0), keep.size(1), x.size(2)}));
}

}  // namespace

// On the CPU the NCHW copy is faster: 0.84 against 1.0 ms a pass, forward and backward, for
// dit-tiny's 64 × 16 × 256 (one thread, LibTorch 1.13).
torch::Tensor grid_conv(torch::nn::Conv2d conv, const torch::Tensor& tokens, std::int64_t grid, bool channels_last) {
    auto b = tokens.size(0), channels = tokens.size(2);
    if (!channels_last)
        return conv->forward(tokens.transpose(1, 2).reshape({b, channels, grid, grid})).flatten(2).transpose(1, 2);
    auto image = tokens.contiguous().view({b, grid, grid, channels}).permute({0, 3, 1, 2});
    return conv->forward(image).permute({0, 2, 3, 1}).reshape({b, grid * grid, channels});
}

// Sinusoidal features of t·1000, as in DiT's TimestepEmbedder.
torch::Tensor timestep_features(const torch::Tensor& t) {
    auto half = kTimestepFrequencies / 2;
    auto freqs = torch::exp(-std::log(10000.0) * torch::arange(half, t.options().dtype(torch::kFloat32)) /
                            static_cast<double>(half));
    auto args = (t.to(torch::kFloat32) * 1000.0).unsqueeze(1) * freqs.unsqueeze(0);
    return torch::cat({torch::cos(args), torch::sin(args)}, 1);
}

// Fixed 2-D sin-cos position embedding for a grid×grid token layout, (1, grid², hidden).
torch::Tensor sincos_position_embedding(std::int64_t hidden, std::int64_t grid) {
    auto quarter = hidden / 4;
    auto omega = 1.0 / torch::pow(10000.0, torch::arange(quarter, torch::kFloat64) / static_cast<double>(quarter));
    auto coords = torch::arange(grid, torch::kFloat64);
    auto ys = coords.repeat_interleave(grid), xs = coords.repeat({grid});
    auto embed = [&](const torch::Tensor& pos) {
        auto out = pos.unsqueeze(1) * omega.unsqueeze(0);
        return torch::cat({torch::sin(out), torch::cos(out)}, 1);
    };
    auto table = torch::cat({embed(ys), embed(xs)}, 1).to(torch::kFloat32);
    if (table.size(1) < hidden)
        table = torch::nn::functional::pad(table, torch::nn::functional::PadFuncOptions({0, hidden - table.size(1)}));
    return table.unsqueeze(0);
}

// torch::nn::Linear::forward runs matmul and then adds the bias for 3-D inputs; at::linear
// folds (B, N, H) inputs into one fused addmm, as PyTorch Python does. Measurably faster
// for DiT-sized layers on the CPU (docs/benchmarks.md).
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
    return torch::linear(x, layer->weight, layer->bias);
}

void init_linear(torch::nn::Linear& layer) {
    torch::nn::init::xavier_uniform_(layer->weight);
    if (layer->options.bias()) torch::nn::init::zeros_(layer->bias);
}

torch::Tensor patchify_latents(const torch::Tensor& x, std::int64_t patch) {
    auto b = x.size(0), ch = x.size(1), g = x.size(2) / patch;
    return x.view({b, ch, g, patch, g, patch}).permute({0, 2, 4, 3, 5, 1}).reshape({b, g * g, patch * patch * ch});
}

DitBlockImpl::DitBlockImpl(const DitConfig& c) : hidden_(c.hidden), heads_(c.heads), grid_(c.input_size / c.patch) {
    auto mlp_hidden = c.hidden * c.mlp_ratio;
    norm1_ = register_module("norm1", plain_norm(c.hidden));
    norm2_ = register_module("norm2", plain_norm(c.hidden));
    qkv_ = register_module("qkv", torch::nn::Linear(c.hidden, 3 * c.hidden));
    proj_ = register_module("proj", torch::nn::Linear(c.hidden, c.hidden));
    fc1_ = register_module("fc1", torch::nn::Linear(c.hidden, mlp_hidden));
    dwconv_ = register_module(
        "dwconv", torch::nn::Conv2d(torch::nn::Conv2dOptions(mlp_hidden, mlp_hidden, 3).padding(1).groups(mlp_hidden)));
    fc2_ = register_module("fc2", torch::nn::Linear(mlp_hidden, c.hidden));
    for (auto* layer : {&qkv_, &proj_, &fc1_, &fc2_}) init_linear(*layer);
    if (c.text_dim > 0) {
        cross_q_ = register_module("cross_q", torch::nn::Linear(c.hidden, c.hidden));
        cross_kv_ = register_module("cross_kv", torch::nn::Linear(c.hidden, 2 * c.hidden));
        cross_proj_ = register_module("cross_proj", torch::nn::Linear(c.hidden, c.hidden));
        for (auto* layer : {&cross_q_, &cross_kv_}) init_linear(*layer);
        // Cross-attention starts switched off, so text conditioning is learned from zero.
        torch::nn::init::zeros_(cross_proj_->weight);
        torch::nn::init::zeros_(cross_proj_->bias);
    }
    scale_shift_table_ =
        register_parameter("scale_shift_table", torch::randn({6, c.hidden}) / std::sqrt(static_cast<double>(c.hidden)));
}

torch::Tensor DitBlockImpl::self_attention(const torch::Tensor& x) {
    auto b = x.size(0), n = x.size(1);
    auto qkv = linear(qkv_, x).view({b, n, 3, heads_, hidden_ / heads_}).permute({2, 0, 3, 1, 4});
    auto out = attention(qkv[0], qkv[1], qkv[2]);
    return linear(proj_, out.transpose(1, 2).reshape({b, n, hidden_}));
}

torch::Tensor DitBlockImpl::cross_attention(const torch::Tensor& x, const torch::Tensor& caption,
                                            const torch::Tensor& mask) {
    auto b = x.size(0), n = x.size(1), l = caption.size(1), head_dim = hidden_ / heads_;
    auto q = linear(cross_q_, x).view({b, n, heads_, head_dim}).transpose(1, 2);
    auto kv = linear(cross_kv_, caption).view({b, l, 2, heads_, head_dim}).permute({2, 0, 3, 1, 4});
    auto out = attention(q, kv[0], kv[1], mask);
    return linear(cross_proj_, out.transpose(1, 2).reshape({b, n, hidden_}));
}

torch::Tensor DitBlockImpl::mlp(const torch::Tensor& x, const torch::Tensor& keep) {
    auto b = x.size(0);
    auto h = linear(fc1_, x);  // (B, N, M), or (B, K, M) for kept tokens
    auto channels = h.size(2);
    // The conv needs the whole grid: kept tokens go back to their places in a zero grid, so a
    // dropped neighbour counts as the zero padding past the image's edge.
    if (keep.defined())
        h = torch::zeros({b, grid_ * grid_, channels}, h.options())
                .scatter(1, keep.unsqueeze(-1).expand({b, keep.size(1), channels}), h);
    h = grid_conv(dwconv_, h, grid_, h.is_cuda());
    if (keep.defined()) h = gather_tokens(h, keep);
    return linear(fc2_, torch::gelu(h, "tanh"));
}

torch::Tensor DitBlockImpl::forward(torch::Tensor x, const torch::Tensor& t6, const torch::Tensor& caption,
                                    const torch::Tensor& caption_mask, const torch::Tensor& keep) {
    auto mod = (scale_shift_table_.unsqueeze(0) + t6).chunk(6, 1);
    const auto &shift_msa = mod[0], &scale_msa = mod[1], &gate_msa = mod[2];
    const auto &shift_mlp = mod[3], &scale_mlp = mod[4], &gate_mlp = mod[5];
    x = torch::addcmul(x, gate_msa, self_attention(modulate(norm1_(x), shift_msa, scale_msa)));
    if (cross_q_) x = x + cross_attention(x, caption, caption_mask);
    return torch::addcmul(x, gate_mlp, mlp(modulate(norm2_(x), shift_mlp, scale_mlp), keep));
}

DitImpl::DitImpl(const DitConfig& c) : config_(c) {
    auto patch_dim = c.patch * c.patch * c.in_channels;
    patch_embed_ = register_module("patch_embed", torch::nn::Linear(patch_dim, c.hidden));
    t_fc1_ = register_module("t_fc1", torch::nn::Linear(kTimestepFrequencies, c.hidden));
    t_fc2_ = register_module("t_fc2", torch::nn::Linear(c.hidden, c.hidden));
    t_block_ = register_module("t_block", torch::nn::Linear(c.hidden, 6 * c.hidden));
    if (c.text_dim > 0) {
        caption_fc1_ = register_module("caption_fc1", torch::nn::Linear(c.text_dim, c.hidden));
        caption_fc2_ = register_module("caption_fc2", torch::nn::Linear(c.hidden, c.hidden));
        null_caption_ = register_parameter(
            "null_caption", torch::randn({c.null_caption_tokens, c.text_dim}) / std::sqrt(static_cast<double>(c.text_dim)));
    } else {
        class_embed_ = register_module("class_embed", torch::nn::Embedding(c.num_classes + 1, c.hidden));
    }
    blocks_ = register_module("blocks", torch::nn::ModuleList());
    for (std::int64_t i = 0; i < c.depth; ++i) blocks_->push_back(DitBlock(c));
    norm_final_ = register_module("norm_final", plain_norm(c.hidden));
    out_ = register_module("out", torch::nn::Linear(c.hidden, patch_dim));
    final_table_ =
        register_parameter("final_table", torch::randn({2, c.hidden}) / std::sqrt(static_cast<double>(c.hidden)));
    pos_embed_ = register_buffer("pos_embed", sincos_position_embedding(c.hidden, c.input_size / c.patch));

    init_linear(patch_embed_);
    for (auto* layer : {&t_fc1_, &t_fc2_, &t_block_}) {
        torch::nn::init::normal_((*layer)->weight, 0.0, 0.02);
        torch::nn::init::zeros_((*layer)->bias);
    }
    if (class_embed_) torch::nn::init::normal_(class_embed_->weight, 0.0, 0.02);
    if (caption_fc1_)
        for (auto* layer : {&caption_fc1_, &caption_fc2_}) init_linear(*layer);
    // Zero output layer: the untrained model predicts zero velocity everywhere.
    torch::nn::init::zeros_(out_->weight);
    torch::nn::init::zeros_(out_->bias);
}

torch::Tensor DitImpl::patchify(const torch::Tensor& x) const { return patchify_latents(x, config_.patch); }

torch::Tensor DitImpl::unpatchify(const torch::Tensor& tokens) const {
    auto b = tokens.size(0), ch = config_.in_channels, p = config_.patch, g = config_.input_size / p;
    return tokens.view({b, g, g, p, p, ch}).permute({0, 5, 1, 3, 2, 4}).reshape({b, ch, g * p, g * p});
}

torch::Tensor DitImpl::forward(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition) {
    return unpatchify(tokens_out(x, t, condition, {}));
}

torch::Tensor DitImpl::forward_kept(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                                    const torch::Tensor& keep) {
    TORCH_CHECK(keep.defined() && keep.dim() == 2 && keep.size(0) == x.size(0), "kept tokens must be (B, K)");
    return tokens_out(x, t, condition, keep);
}

torch::Tensor DitImpl::tokens_out(const torch::Tensor& x, const torch::Tensor& t, const DitCondition& condition,
                                  const torch::Tensor& keep) {
    auto tokens = linear(patch_embed_, patchify(x)) + pos_embed_;
    auto c = linear(t_fc2_, torch::silu(linear(t_fc1_, timestep_features(t).to(tokens.dtype()))));
    torch::Tensor caption, caption_mask;
    if (takes_text()) {
        TORCH_CHECK(condition.text.defined() && condition.text.dim() == 3 && condition.text.size(2) == config_.text_dim,
                    "a text DiT needs captions of width ", config_.text_dim);
        caption = linear(caption_fc2_, torch::gelu(linear(caption_fc1_, condition.text.to(tokens.dtype())), "tanh"));
        caption_mask = caption_key_mask(condition, caption.size(1));
    } else {
        c = c + class_embed_(condition.labels);
    }
    auto t6 = linear(t_block_, torch::silu(c)).view({x.size(0), 6, config_.hidden});
    // With kept tokens, the mixer's blocks see every token and the blocks after it the kept ones.
    auto mixer = keep.defined() ? std::min<std::int64_t>(config_.mixer_depth, config_.depth) : config_.depth;
    for (std::int64_t i = 0; i < config_.depth; ++i) {
        if (i == mixer) tokens = gather_tokens(tokens, keep);
        auto& block = *(*blocks_)[static_cast<std::size_t>(i)]->as<DitBlock>();
        tokens = block.forward(tokens, t6, caption, caption_mask, i < mixer ? torch::Tensor() : keep);
    }
    if (keep.defined() && mixer == config_.depth) tokens = gather_tokens(tokens, keep);
    auto mod = (final_table_.unsqueeze(0) + c.unsqueeze(1)).chunk(2, 1);
    return linear(out_, modulate(norm_final_(tokens), mod[0], mod[1]));
}

DitCondition DitImpl::dropped(const DitCondition& condition, const torch::Tensor& drop) const {
    DitCondition out;
    if (!takes_text()) {
        out.labels = torch::where(drop, torch::full_like(condition.labels, config_.num_classes), condition.labels);
        return out;
    }
    auto rows = condition.text.size(0), own = condition.text.size(1), null_tokens = null_caption_.size(0);
    auto tokens = std::max(own, null_tokens);
    auto text = condition.text.to(null_caption_.dtype());
    if (tokens > own) text = torch::nn::functional::pad(text, torch::nn::functional::PadFuncOptions({0, 0, 0, tokens - own}));
    auto null_text = null_caption_;
    if (tokens > null_tokens)
        null_text = torch::nn::functional::pad(null_text, torch::nn::functional::PadFuncOptions({0, 0, 0, tokens - null_tokens}));
    auto lengths = condition.text_len.defined() ? condition.text_len : torch::full({rows}, own, drop.options().dtype(torch::kInt64));
    out.text = torch::where(drop.view({-1, 1, 1}), null_text.unsqueeze(0).expand({rows, tokens, config_.text_dim}), text);
    out.text_len = torch::where(drop, torch::full_like(lengths, null_tokens), lengths);
    return out;
}

DitCondition DitImpl::unconditional(std::int64_t rows, torch::Device device) const {
    DitCondition out;
    if (!takes_text()) {
        out.labels = torch::full({rows}, config_.num_classes, torch::TensorOptions(torch::kInt64).device(device));
        return out;
    }
    out.text = null_caption_.unsqueeze(0).expand({rows, null_caption_.size(0), config_.text_dim});
    return out;  // no lengths: every token of the null caption is attended
}

}  // namespace tessera::common
