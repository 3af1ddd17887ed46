// The two-conv classifier.
#include "cnn.h"

#include <torch/torch.h>

namespace tessera::common {

CnnImpl::CnnImpl() {
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 5).padding(2)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 5).padding(2)));
    fc1_ = register_module("fc1", torch::nn::Linear(kFlatFeatures, kFeatures));
    fc2_ = register_module("fc2", torch::nn::Linear(kFeatures, kClasses));
}

torch::Tensor CnnImpl::forward(const torch::Tensor& x, const torch::Tensor& dropout_scale) {
    auto h = torch::max_pool2d(torch::relu(conv1_(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_(h)), 2).flatten(1);
    if (dropout_scale.defined()) h = h * dropout_scale;
    return fc2_(torch::relu(fc1_(h)));
}

torch::Tensor CnnImpl::features(const torch::Tensor& x) {
    auto h = torch::max_pool2d(torch::relu(conv1_(x)), 2);
    h = torch::max_pool2d(torch::relu(conv2_(h)), 2).flatten(1);
    return torch::relu(fc1_(h));
}

}  // namespace tessera::common
