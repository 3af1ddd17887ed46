// Process-wide malloc settings for training processes (tessera-bench, tessera-client).
#pragma once

namespace tessera::common {

// Keeps freed tensor memory in the heap for reuse. By default glibc serves large blocks with
// mmap and returns them on free, so every step's fresh activations and gradients fault in
// new zeroed pages; measured +10 % samples/s for dit-s on 2 CPU cores (docs/benchmarks.md).
// Call once at start-up, before threads start.
void tune_allocator_for_training();

}  // namespace tessera::common
