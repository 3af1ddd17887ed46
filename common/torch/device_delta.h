// Δ = θ_H − θ0 as a dense int8 delta file. When the weights live on a CUDA device and the
// CUDA kernels were built, the delta is formed and quantised on the GPU (common/cuda), so
// only int8 values and block scales are copied to the host; otherwise the CPU codec runs.
#pragma once

#include "../delta_codec.h"
#include "tensor_convert.h"

namespace tessera::common {

// True when this build contains the CUDA delta kernel.
bool cuda_delta_kernel_built();

Result<Bytes> encode_int8_delta(const TorchTensorMap& theta_h, const TorchTensorMap& theta0);

}  // namespace tessera::common
