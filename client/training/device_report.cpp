// The LibTorch build and the GPUs the CUDA runtime sees, for the doctor.
#include "device_report.h"

#include <torch/torch.h>
#include <torch/version.h>

#ifdef TESSERA_TORCH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace tessera::client {

TorchReport torch_report() {
    TorchReport report;
    report.libtorch_version = TORCH_VERSION;
    report.cpu_threads = torch::get_num_threads();
#ifdef TESSERA_TORCH_CUDA
    report.cuda_build = true;
    report.cuda_version = std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
    int count = 0;
    if (auto status = cudaGetDeviceCount(&count); status != cudaSuccess) {
        report.problem = cudaGetErrorString(status);
        return report;
    }
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp properties{};
        GpuReport gpu;
        gpu.index = i;
        if (cudaGetDeviceProperties(&properties, i) == cudaSuccess) {
            gpu.name = properties.name;
            gpu.total_bytes = static_cast<std::int64_t>(properties.totalGlobalMem);
        }
        std::size_t free_bytes = 0, total_bytes = 0;
        if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
            gpu.free_bytes = static_cast<std::int64_t>(free_bytes);
        report.gpus.push_back(gpu);
    }
#endif
    return report;
}

}  // namespace tessera::client
