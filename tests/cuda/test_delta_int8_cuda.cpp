// The CUDA delta kernel against the CPU codec, bit for bit, on a real GPU. Built only with
// CUDA; on a machine without a GPU it exits 77, which meson reports as skipped.
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

#include "cuda/delta_int8.h"
#include "int8_blockwise.h"

using namespace tessera::common;

namespace {

constexpr int kSkip = 77;

template <class T>
T* device_copy(const std::vector<T>& host) {
    T* device = nullptr;
    cudaMalloc(&device, host.size() * sizeof(T));
    cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    return device;
}

// Returns the number of mismatches for a delta of n values, given as θ_H and θ0 or, when
// `delta_given`, as Δ itself with a null θ0 (how the client encodes a trained Δ).
int check(std::int64_t n, std::uint32_t seed, bool delta_given) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    std::vector<float> theta0(n), theta_h(n), delta(n);
    for (std::int64_t i = 0; i < n; ++i) {
        theta0[i] = normal(rng);
        bool unchanged_block = i >= 256 && i < 512;  // a block of zeros: scale 0
        bool outlier = i % 997 == 0;
        theta_h[i] = unchanged_block ? theta0[i] : theta0[i] + normal(rng) * (outlier ? 50.0f : 1.0f);
        delta[i] = theta_h[i] - theta0[i];
    }

    std::vector<std::int8_t> q_cpu(n);
    std::vector<float> scales_cpu(int8_block_count(n));
    quantize_int8_blockwise(delta, q_cpu, scales_cpu);

    auto* d_h = device_copy(delta_given ? delta : theta_h);
    auto* d_0 = delta_given ? nullptr : device_copy(theta0);
    std::int8_t* d_q = nullptr;
    float* d_scales = nullptr;
    cudaMalloc(&d_q, n);
    cudaMalloc(&d_scales, scales_cpu.size() * sizeof(float));
    auto error = delta_int8_quantize_cuda(d_h, d_0, n, d_q, d_scales, nullptr);
    if (!error.empty()) {
        std::printf("kernel error: %s\n", error.c_str());
        return 1;
    }
    std::vector<std::int8_t> q_gpu(n);
    std::vector<float> scales_gpu(scales_cpu.size());
    cudaMemcpy(q_gpu.data(), d_q, n, cudaMemcpyDeviceToHost);
    cudaMemcpy(scales_gpu.data(), d_scales, scales_gpu.size() * sizeof(float), cudaMemcpyDeviceToHost);
    for (void* p :
         {static_cast<void*>(d_h), static_cast<void*>(d_0), static_cast<void*>(d_q), static_cast<void*>(d_scales)})
        cudaFree(p);

    int mismatches = 0;
    for (std::int64_t i = 0; i < n; ++i) mismatches += q_gpu[i] != q_cpu[i];
    for (std::size_t b = 0; b < scales_cpu.size(); ++b) mismatches += scales_gpu[b] != scales_cpu[b];
    std::printf("n=%lld%s: %d mismatches against the CPU codec\n", static_cast<long long>(n),
                delta_given ? " (delta given)" : "", mismatches);
    return mismatches;
}

}  // namespace

int main() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no CUDA device: skipped\n");
        return kSkip;
    }
    int failures = 0, checks = 0;
    for (bool delta_given : {false, true})
        for (std::int64_t n : {1LL, 255LL, 256LL, 257LL, 100000LL, 3000001LL}) {
            failures += check(n, static_cast<std::uint32_t>(n), delta_given) != 0;
            ++checks;
        }
    std::printf("%d passed, %d failed\n", checks - failures, failures);
    return failures == 0 ? 0 : 1;
}
