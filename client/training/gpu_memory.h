// The CUDA caching allocator's memory: a cap for a volunteer's GPU, and handing cached blocks
// back. Both do nothing on a CPU-only LibTorch (a cap there is an error: it cannot hold).
#pragma once

#include <c10/core/Device.h>

#include <cstdint>

#include "result.h"

namespace tessera::client {

// Caps the caching allocator of `device` at `gigabytes` (a fraction of the GPU's memory);
// beyond it LibTorch reports out-of-memory, which the retry with micro-batches handles.
// Zero or a CPU device: no cap.
common::Status limit_gpu_memory(const c10::Device& device, double gigabytes);

// The bytes of `device`'s memory this process may still take: the GPU's free memory, within
// the cap when one is set. -1 on a CPU device or a CPU-only LibTorch, or when it cannot be read.
std::int64_t gpu_bytes_available(const c10::Device& device);

// Returns the blocks the caching allocator holds but no tensor uses to the GPU: after an
// out-of-memory error, so a retry is not refused for fragments, and before another process
// (a benchmark's reference) needs the memory.
void release_gpu_cache();

}  // namespace tessera::client
