// One thread block per 256-value quantisation block: each thread forms one delta value, the
// block reduces |Δ| to its absmax (warp shuffles, then shared memory), and each thread writes
// its int8. The arithmetic (absmax / 127, 1 / scale, round-half-even, clamp ±127) matches
// quantize_int8_blockwise on the CPU bit for bit.
#include <cuda_runtime.h>

#include "delta_int8.h"

namespace tessera::common {
namespace {

constexpr int kBlock = 256;
constexpr int kWarp = 32;

__global__ void delta_int8_kernel(const float* __restrict__ theta_h, const float* __restrict__ theta_0, std::int64_t n,
                                  std::int8_t* __restrict__ q, float* __restrict__ scales) {
    __shared__ float warp_max[kBlock / kWarp];
    std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kBlock + threadIdx.x;
    float delta = i < n ? (theta_0 != nullptr ? theta_h[i] - theta_0[i] : theta_h[i]) : 0.0f;
    float m = fabsf(delta);
    for (int offset = kWarp / 2; offset > 0; offset /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, offset));
    if (threadIdx.x % kWarp == 0) warp_max[threadIdx.x / kWarp] = m;
    __syncthreads();
    if (threadIdx.x < kWarp) {
        m = threadIdx.x < kBlock / kWarp ? warp_max[threadIdx.x] : 0.0f;
        for (int offset = kWarp / 2; offset > 0; offset /= 2) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, offset));
        if (threadIdx.x == 0) warp_max[0] = m;
    }
    __syncthreads();
    float scale = __fdiv_rn(warp_max[0], 127.0f);
    float inverse = scale > 0.0f ? __fdiv_rn(1.0f, scale) : 0.0f;
    if (threadIdx.x == 0) scales[blockIdx.x] = scale;
    if (i < n) q[i] = static_cast<std::int8_t>(fminf(fmaxf(rintf(__fmul_rn(delta, inverse)), -127.0f), 127.0f));
}

}  // namespace

std::string delta_int8_quantize_cuda(const float* theta_h, const float* theta_0, std::int64_t n, std::int8_t* q,
                                     float* scales, void* stream) {
    if (n <= 0) return "";
    auto blocks = static_cast<unsigned>((n + kBlock - 1) / kBlock);
    delta_int8_kernel<<<blocks, kBlock, 0, static_cast<cudaStream_t>(stream)>>>(theta_h, theta_0, n, q, scales);
    cudaError_t error = cudaGetLastError();
    return error == cudaSuccess ? "" : cudaGetErrorString(error);
}

}  // namespace tessera::common
