// Encoder: three strided convs down to 8×8; decoder: nearest upsampling and convs back up.
#include "autoencoder.h"

#include <torch/torch.h>

namespace tessera::common {
namespace {

torch::nn::Conv2d conv(std::int64_t in, std::int64_t out, std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
    return torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(pad));
}

torch::nn::Upsample upsample() {
    return torch::nn::Upsample(
        torch::nn::UpsampleOptions().scale_factor(std::vector<double>{2, 2}).mode(torch::kNearest));
}

}  // namespace

EncoderImpl::EncoderImpl() {
    layers_ = register_module("layers", torch::nn::Sequential(conv(1, 16, 3, 1, 1), torch::nn::SiLU(),
                                                              conv(16, 32, 4, 2, 1), torch::nn::SiLU(),  // 16×16
                                                              conv(32, 32, 4, 2, 1), torch::nn::SiLU(),  // 8×8
                                                              conv(32, kLatentChannels, 3, 1, 1)));
}

torch::Tensor EncoderImpl::forward(const torch::Tensor& images) { return layers_->forward(images); }

DecoderImpl::DecoderImpl() {
    layers_ =
        register_module("layers", torch::nn::Sequential(conv(kLatentChannels, 32, 3, 1, 1), torch::nn::SiLU(),
                                                        upsample(), conv(32, 32, 3, 1, 1), torch::nn::SiLU(),  // 16×16
                                                        upsample(), conv(32, 16, 3, 1, 1), torch::nn::SiLU(),  // 32×32
                                                        conv(16, 1, 3, 1, 1), torch::nn::Tanh()));
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& latents) { return layers_->forward(latents); }

}  // namespace tessera::common
