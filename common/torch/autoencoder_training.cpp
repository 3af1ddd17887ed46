// Autoencoder fitting with AdamW and a cosine-decayed learning rate.
#include "autoencoder_training.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>

namespace tessera::common {
namespace {

constexpr std::int64_t kInferenceBatch = 1024;

}  // namespace

Result<Autoencoder> train_autoencoder(const torch::Tensor& images, const AutoencoderConfig& config,
                                      const AutoencoderProgress& progress) {
    try {
        torch::manual_seed(config.seed);
        Autoencoder ae{Encoder(), Decoder()};
        std::vector<torch::Tensor> params = ae.encoder->parameters();
        for (auto& p : ae.decoder->parameters()) params.push_back(p);
        torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(config.lr).weight_decay(0.0));
        auto generator = at::detail::createCPUGenerator(config.seed);
        auto n = images.size(0);
        for (std::int64_t step = 0; step < config.steps; ++step) {
            double cosine = 0.5 * (1 + std::cos(M_PI * static_cast<double>(step) / static_cast<double>(config.steps)));
            for (auto& group : optimizer.param_groups())
                static_cast<torch::optim::AdamWOptions&>(group.options()).lr(config.lr * (0.05 + 0.95 * cosine));
            auto index = torch::randint(n, {config.batch_size}, generator, torch::kInt64);
            auto batch = images.index_select(0, index);
            optimizer.zero_grad();
            auto loss = torch::mse_loss(ae.decoder->forward(ae.encoder->forward(batch)), batch);
            loss.backward();
            optimizer.step();
            if (progress) progress(step + 1, config.steps, loss.item<double>());
        }
        ae.encoder->eval();
        ae.decoder->eval();
        return ae;
    } catch (const c10::Error& error) {
        return make_error(std::string("autoencoder training failed: ") + error.what_without_backtrace());
    }
}

double reconstruction_mse(Autoencoder& autoencoder, const torch::Tensor& images) {
    torch::NoGradGuard no_grad;
    double total = 0;
    for (std::int64_t begin = 0; begin < images.size(0); begin += kInferenceBatch) {
        auto batch = images.slice(0, begin, begin + kInferenceBatch);
        auto decoded = autoencoder.decoder->forward(autoencoder.encoder->forward(batch));
        total += torch::mse_loss(decoded, batch, at::Reduction::Sum).item<double>();
    }
    return total / static_cast<double>(images.numel());
}

torch::Tensor encode_images(Encoder& encoder, const torch::Tensor& images) {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> parts;
    for (std::int64_t begin = 0; begin < images.size(0); begin += kInferenceBatch)
        parts.push_back(encoder->forward(images.slice(0, begin, begin + kInferenceBatch)));
    return torch::cat(parts);
}

}  // namespace tessera::common
