// A model's weights as a name → tensor map (its parameters, in named_parameters order), and
// loading such a map back with every name and shape checked.
#pragma once

#include <torch/nn/module.h>

#include "tensor_convert.h"

namespace tessera::common {

// Detached copies of the module's parameters (on the module's device).
TorchTensorMap state_of(const torch::nn::Module& module);

// Copies `state` into the module's parameters. Missing, extra or misshaped tensors are errors
// and leave the module unchanged.
Status load_state(torch::nn::Module& module, const TorchTensorMap& state);

std::int64_t parameter_count(const torch::nn::Module& module);

}  // namespace tessera::common
