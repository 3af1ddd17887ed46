// Conversion between safetensors views / delta tensors and named torch::Tensor maps, so that
// training code deals in tensors. Part of tessera_torch: the only library that includes torch.
#pragma once

#include <torch/types.h>

#include <map>
#include <string>

#include "../delta_codec.h"
#include "../safetensors.h"

namespace tessera::common {

// Sorted by name, like safetensors headers.
using TorchTensorMap = std::map<std::string, torch::Tensor>;

// Copies a view into a new CPU tensor of the same dtype and shape (views may be unaligned).
Result<torch::Tensor> to_torch(const TensorView& view);
Result<TorchTensorMap> to_torch_map(const TensorFile& file);

// Serialises CPU or GPU tensors of supported dtypes as a safetensors file.
Result<Bytes> to_safetensors(const TorchTensorMap& tensors, const TensorMetadata& metadata = {});

// f32 copies for the delta codecs, and back.
NamedTensors to_named_f32(const TorchTensorMap& tensors);
TorchTensorMap from_named_f32(const NamedTensors& tensors);

}  // namespace tessera::common
