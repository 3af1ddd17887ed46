// Training the frozen "VAE" of the Fashion-MNIST workload: a plain convolutional
// autoencoder fitted once with MSE, then used to encode every image to a latent.
#pragma once

#include <functional>

#include "../result.h"
#include "models/autoencoder.h"

namespace tessera::common {

struct AutoencoderConfig {
    std::int64_t steps = 2500;
    std::int64_t batch_size = 128;
    double lr = 2e-3;
    std::uint64_t seed = 0;
};

struct Autoencoder {
    Encoder encoder;
    Decoder decoder;
};

// Called after each step with (step, steps, loss).
using AutoencoderProgress = std::function<void(std::int64_t, std::int64_t, double)>;

// `images`: (N, 1, 32, 32) in [-1, 1].
Result<Autoencoder> train_autoencoder(const torch::Tensor& images, const AutoencoderConfig& config,
                                      const AutoencoderProgress& progress = {});

// Mean squared error of decode(encode(x)) against x, in [-1, 1] pixel units.
double reconstruction_mse(Autoencoder& autoencoder, const torch::Tensor& images);

// Latents (N, 4, 8, 8) of `images`, in batches, without gradients.
torch::Tensor encode_images(Encoder& encoder, const torch::Tensor& images);

}  // namespace tessera::common
