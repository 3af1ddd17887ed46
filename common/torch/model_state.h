// A model's weights as a name → tensor map (its parameters, in named_parameters order), and
// loading such a map back with every name and shape checked.
#pragma once

#include <torch/nn/module.h>

#include <filesystem>

#include "tensor_convert.h"

namespace tessera::common {

// Detached copies of the module's parameters (on the module's device).
TorchTensorMap state_of(const torch::nn::Module& module);

// Copies `state` into the module's parameters. Missing, extra or misshaped tensors are errors
// and leave the module unchanged.
Status load_state(torch::nn::Module& module, const TorchTensorMap& state);

// load_state from a safetensors file of at most `max_bytes`; errors name the file.
Status load_state_file(torch::nn::Module& module, const std::filesystem::path& file,
                       std::uint64_t max_bytes = std::uint64_t{256} << 20);

std::int64_t parameter_count(const torch::nn::Module& module);

}  // namespace tessera::common
