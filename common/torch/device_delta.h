// A weight delta encoded where it lives. On a GPU the codec's work happens there — top-k
// selection, bf16 rounding, and int8 quantisation by the common/cuda kernel when it was
// built — and only the encoded values (with indices and scales) are copied to the host.
// Tensors on the CPU go through the CPU codec. Either way the bytes are those encode_delta
// writes for the same Δ, except that a GPU's top-k may keep another of several entries of
// equal magnitude.
#pragma once

#include "../delta_codec.h"
#include "tensor_convert.h"

namespace tessera::common {

// `delta` holds f32 tensors, all on one device. Fails on non-finite values.
Result<Bytes> encode_delta_on_device(const TorchTensorMap& delta, const DeltaEncoding& encoding);

// The GPU path with LibTorch operations, on whatever device the tensors are (the tests run
// it on the CPU); int8 uses the CUDA kernel for CUDA tensors when it was built.
Result<Bytes> encode_delta_with_torch(const TorchTensorMap& delta, const DeltaEncoding& encoding);

}  // namespace tessera::common
