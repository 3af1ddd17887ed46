// The pieces of the DiT that the router (router.h) builds on too: timestep and position
// features, the fused linear layer, the token grid's convolution, the patch layout and the layers'
// initialisation.
#pragma once

#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

namespace tessera::common {

constexpr std::int64_t kTimestepFrequencies = 256;

// Sinusoidal features of t·1000 (B, kTimestepFrequencies), as in DiT's TimestepEmbedder.
torch::Tensor timestep_features(const torch::Tensor& t);
// Fixed 2-D sin-cos position embedding for a grid×grid token layout, (1, grid², hidden).
torch::Tensor sincos_position_embedding(std::int64_t hidden, std::int64_t grid);
// x·Wᵀ + b as one fused addmm for (B, N, H) inputs (faster than Linear::forward on the CPU).
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x);
// `conv` (depthwise) over tokens (B, grid², M) laid out as a grid, (B, grid², M) out. Channels-last:
// the tokens read as an NHWC grid, with no transposed copy either way (for GPUs); otherwise on an
// NCHW copy, which LibTorch 1.13's CPU kernel computes faster. Both give the same values.
torch::Tensor grid_conv(torch::nn::Conv2d conv, const torch::Tensor& tokens, std::int64_t grid, bool channels_last);
// Xavier-uniform weights, zero bias.
void init_linear(torch::nn::Linear& layer);
// (B, C, S, S) → (B, N, P) patches, token n = gy·G + gx (docs/protocol.md, "Model presets").
torch::Tensor patchify_latents(const torch::Tensor& x, std::int64_t patch);

}  // namespace tessera::common
