// glibc mallopt settings.
#include "allocator_tuning.h"

#include <malloc.h>

namespace tessera::common {

void tune_allocator_for_training() {
    // 32 MiB is the largest mmap threshold glibc accepts on 64-bit; fixing it also stops the
    // threshold from moving with each free. A large trim threshold keeps the heap's top.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

}  // namespace tessera::common
