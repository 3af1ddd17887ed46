// How long an upload's body may take to arrive. Not a fixed time, which would refuse every
// result over rate × time from a volunteer whose link (or upload cap) is slow: bytes must keep
// coming — no gap longer than the idle timeout — and, once the grace has passed, at least at the
// minimum rate on average (as Apache's mod_reqtimeout MinRate). A connection that trickles is
// closed; the upload slots (upload_slots.h) bound how many bodies are open at once.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "result_upload.h"

namespace tessera::server {

struct UploadPace {
    std::chrono::seconds idle_timeout{60};
    std::chrono::seconds grace{common::kDefaultUploadGraceS};
    std::uint64_t min_bytes_per_s = common::kDefaultUploadMinBytesPerS;  // 0: only the idle timeout
};

// The time by which more of a body begun at `started`, `received` bytes of it in by `now`, must
// have arrived.
inline std::chrono::steady_clock::time_point next_bytes_due(const UploadPace& pace,
                                                            std::chrono::steady_clock::time_point started,
                                                            std::chrono::steady_clock::time_point now,
                                                            std::uint64_t received) {
    if (pace.min_bytes_per_s == 0) return now + pace.idle_timeout;
    auto earned = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
        std::chrono::duration<double>(static_cast<double>(received) / static_cast<double>(pace.min_bytes_per_s)));
    return std::min(now + pace.idle_timeout, started + pace.grace + earned);
}

}  // namespace tessera::server
