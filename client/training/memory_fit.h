// A GPU's micro-batch from its free memory, before any out-of-memory error: a training step's
// device memory is taken to grow linearly with its micro-batch (the weights, gradients, AdamW's
// moments and the unit's samples fixed; activations per sample), measured at two small ones.
#pragma once

#include <cstdint>

namespace tessera::client {

// Share of the free memory a step may plan to use: the caching allocator's rounding and
// fragmentation, and what other programs take meanwhile, need the rest.
inline constexpr double kMemoryHeadroom = 0.85;

// One probe: a training step at `micro_batch` rows took `bytes` of the device's free memory.
struct MemoryUse {
    std::int64_t micro_batch = 0;
    std::int64_t bytes = 0;
};

// The largest micro-batch whose step fits within `headroom` × `available` bytes, on the line
// through the two probes; 0 (the whole batch at once) when `batch` fits or when the probes
// cannot tell (the larger took no more memory, or nothing is known of the free memory); at
// least 1 otherwise (smaller still is the out-of-memory retry's to find).
std::int64_t micro_batch_for_memory(MemoryUse small, MemoryUse large, std::int64_t available, std::int64_t batch,
                                    double headroom = kMemoryHeadroom);

}  // namespace tessera::client
