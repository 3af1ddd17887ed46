// The CUDA caching allocator's memory: a cap for a volunteer's GPU, and handing cached blocks
// back. Both do nothing on a CPU-only LibTorch (a cap there is an error: it cannot hold).
#pragma once

#include <c10/core/Device.h>

#include "result.h"

namespace tessera::client {

// Caps the caching allocator of `device` at `gigabytes` (a fraction of the GPU's memory);
// beyond it LibTorch reports out-of-memory, which the retry with micro-batches handles.
// Zero or a CPU device: no cap.
common::Status limit_gpu_memory(const c10::Device& device, double gigabytes);

// Returns the blocks the caching allocator holds but no tensor uses to the GPU: after an
// out-of-memory error, so a retry is not refused for fragments, and before another process
// (a benchmark's reference) needs the memory.
void release_gpu_cache();

}  // namespace tessera::client
