// The classifier workload: two 5×5 conv layers with max-pooling and a small MLP head,
// ~108K parameters, for 1×28×28 images (Fashion-MNIST's "2 Conv ~113K parameters" class).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

namespace tessera::common {

class CnnImpl : public torch::nn::Module {
public:
    CnnImpl();
    // x: (B, 1, 28, 28) normalised pixels → logits (B, 10).
    torch::Tensor forward(const torch::Tensor& x);

private:
    torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr};
    torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
    torch::nn::Dropout dropout_{nullptr};
};
TORCH_MODULE(Cnn);

}  // namespace tessera::common
