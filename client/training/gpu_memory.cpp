#include "bytes.h"
#include "gpu_memory.h"

#include <algorithm>

#ifdef TESSERA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace tessera::client {

common::Status limit_gpu_memory(const c10::Device& device, double gigabytes) {
    if (gigabytes <= 0 || !device.is_cuda()) return {};
#ifdef TESSERA_TORCH_CUDA
    int index = device.has_index() ? device.index() : 0;
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return common::make_error("cannot read the memory of " + device.str());
    double fraction = std::min(1.0, gigabytes * double(common::kGiB) / double(total_bytes));
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index);
    return {};
#else
    return common::make_error("--max-gpu-mem needs a CUDA build of LibTorch");
#endif
}

void release_gpu_cache() {
#ifdef TESSERA_TORCH_CUDA
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace tessera::client
