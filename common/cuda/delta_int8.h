// GPU computation of a weight delta and its blockwise int8 quantisation (the same numbers
// as common/int8_blockwise.h): Δ = θ_H − θ0 is formed and quantised on the device, so only
// the int8 values and one f32 scale per 256 values (about a quarter of the f32 bytes) cross
// PCIe. Plain CUDA: no torch or CUDA headers here, so any translation unit may include it.
#pragma once

#include <cstdint>
#include <string>

namespace tessera::common {

// All pointers are device pointers; `q` has n entries, `scales` ceil(n / 256). `theta_0` may be
// null: then `theta_h` is the delta itself. `stream` is a cudaStream_t (nullptr: the default
// stream). Returns "" on success, else the CUDA error.
std::string delta_int8_quantize_cuda(const float* theta_h, const float* theta_0, std::int64_t n, std::int8_t* q,
                                     float* scales, void* stream);

}  // namespace tessera::common
