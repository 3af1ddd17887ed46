// The classifier workload: two 5×5 conv layers with max-pooling and a small MLP head,
// ~108K parameters, for 1×28×28 images (Fashion-MNIST's "2 Conv ~113K parameters" class).
// Dropout before fc1 takes its mask as an argument: training draws it from the unit's
// specified stream (docs/protocol.md, "Randomness"), not from torch's generator.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace tessera::common {

class CnnImpl : public torch::nn::Module {
public:
    CnnImpl();
    // Dropout keeps a value with probability 1 − kDropout and scales it by 1 / (1 − kDropout).
    static constexpr double kDropout = 0.25;
    static constexpr std::int64_t kImageSide = 28;  // its input: 1 × kImageSide × kImageSide pixels
    static constexpr std::int64_t kClasses = 10;
    static constexpr std::int64_t kFlatFeatures = 32 * 7 * 7;

    // x: (B, 1, 28, 28) normalised pixels → logits (B, 10). `dropout_scale` (B, kFlatFeatures):
    // what each flattened feature is multiplied by before fc1 (0 or 1 / (1 − kDropout));
    // undefined: no dropout (evaluation).
    torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& dropout_scale = {});
    // The penultimate layer's activations (B, kFeatures), without dropout: what the project's
    // FID compares (server/bench/fleet/frechet_distance.h).
    static constexpr std::int64_t kFeatures = 60;
    torch::Tensor features(const torch::Tensor& x);

private:
    torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
    torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace tessera::common
