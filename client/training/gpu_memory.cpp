#include "bytes.h"
#include "gpu_memory.h"

#include <algorithm>
#include <atomic>

#ifdef TESSERA_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

namespace tessera::client {
#ifdef TESSERA_TORCH_CUDA
namespace {

// The cap limit_gpu_memory set, in bytes (0: none); the allocator's fraction is process-wide too.
std::atomic<std::int64_t> cap_bytes{0};

}  // namespace
#endif

common::Status limit_gpu_memory(const c10::Device& device, double gigabytes) {
    if (gigabytes <= 0 || !device.is_cuda()) return {};
#ifdef TESSERA_TORCH_CUDA
    int index = device.has_index() ? device.index() : 0;
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(index) != cudaSuccess || cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return common::make_error("cannot read the memory of " + device.str());
    double fraction = std::min(1.0, gigabytes * double(common::kGiB) / double(total_bytes));
    c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index);
    cap_bytes = static_cast<std::int64_t>(fraction * double(total_bytes));
    return {};
#else
    return common::make_error("--max-gpu-mem needs a CUDA build of LibTorch");
#endif
}

std::int64_t gpu_bytes_available(const c10::Device& device) {
    if (!device.is_cuda()) return -1;
#ifdef TESSERA_TORCH_CUDA
    std::size_t free_bytes = 0, total_bytes = 0;
    if (cudaSetDevice(device.has_index() ? device.index() : 0) != cudaSuccess ||
        cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess)
        return -1;
    auto available = static_cast<std::int64_t>(free_bytes);
    return cap_bytes > 0 ? std::min<std::int64_t>(available, cap_bytes) : available;
#else
    return -1;
#endif
}

void release_gpu_cache() {
#ifdef TESSERA_TORCH_CUDA
    c10::cuda::CUDACachingAllocator::emptyCache();
#endif
}

}  // namespace tessera::client
