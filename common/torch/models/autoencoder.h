// The small convolutional autoencoder that plays the VAE: 1×32×32 images in [-1, 1] ↔
// 4×8×8 latents. Trained once by tessera-data, then frozen; the server keeps the decoder to
// render samples.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/pimpl.h>

namespace tessera::common {

constexpr std::int64_t kLatentChannels = 4;
constexpr std::int64_t kLatentSize = 8;
constexpr std::int64_t kImageSize = 32;

class EncoderImpl : public torch::nn::Module {
public:
    EncoderImpl();
    torch::Tensor forward(const torch::Tensor& images);  // (B,1,32,32) → (B,4,8,8)

private:
    torch::nn::Sequential layers_{nullptr};
};
TORCH_MODULE(Encoder);

class DecoderImpl : public torch::nn::Module {
public:
    DecoderImpl();
    torch::Tensor forward(const torch::Tensor& latents);  // (B,4,8,8) → (B,1,32,32) in [-1,1]

private:
    torch::nn::Sequential layers_{nullptr};
};
TORCH_MODULE(Decoder);

}  // namespace tessera::common
