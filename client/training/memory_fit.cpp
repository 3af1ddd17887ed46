#include "memory_fit.h"

#include <algorithm>
#include <cmath>

namespace tessera::client {

std::int64_t micro_batch_for_memory(MemoryUse small, MemoryUse large, std::int64_t available, std::int64_t batch,
                                    double headroom) {
    if (available <= 0 || batch < 1 || large.micro_batch <= small.micro_batch || small.micro_batch < 1) return 0;
    double per_sample =
        static_cast<double>(large.bytes - small.bytes) / static_cast<double>(large.micro_batch - small.micro_batch);
    if (!(per_sample > 0)) return 0;
    double fixed =
        std::max(0.0, static_cast<double>(small.bytes) - per_sample * static_cast<double>(small.micro_batch));
    double rows = std::floor((headroom * static_cast<double>(available) - fixed) / per_sample);
    if (rows >= static_cast<double>(batch)) return 0;
    return std::max<std::int64_t>(1, static_cast<std::int64_t>(std::max(rows, 1.0)));
}

}  // namespace tessera::client
