// bf16 autocast on CUDA for the trainer's forward passes, and the scope of the weights' bf16
// copies it keeps. Included by the trainer alone.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/version.h>

namespace tessera::common {

// LibTorch 2.4 replaced the CUDA-only autocast switches with per-device ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
inline void set_cuda_autocast(bool enabled) {
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCUDA, enabled);
}
#else
inline void set_cuda_autocast(bool enabled) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(enabled);
}
#endif

// bf16 autocast on CUDA for the scope of a forward pass. The bf16 copies of the weights it
// makes stay cached (the backward passes run outside it) until a CastCache scope ends.
class CudaAutocast {
public:
    explicit CudaAutocast(bool enable) : enabled_(enable) {
        if (enabled_) set_cuda_autocast(true);
    }
    ~CudaAutocast() {
        if (enabled_) set_cuda_autocast(false);
    }
    CudaAutocast(const CudaAutocast&) = delete;
    CudaAutocast& operator=(const CudaAutocast&) = delete;

private:
    bool enabled_;
};

// The weights' bf16 copies autocast cached, kept for a step's micro-batches (each weight is
// cast once a step, not once a micro-batch) and dropped at its end, before the optimizer
// changes the weights in place.
class CastCache {
public:
    CastCache() = default;
    ~CastCache() { at::autocast::clear_cache(); }
    CastCache(const CastCache&) = delete;
    CastCache& operator=(const CastCache&) = delete;
};

}  // namespace tessera::common
