// Whether a task is merging (docs/operations.md, "When a task merges nothing"): results have
// come back for StallGuard::kStallSeconds since the task's last merge and none was merged.
// Reported whatever the cause — every result refused, a validator or aggregator that stopped —
// with the refusals since the last merge by reason: on the dashboard, in /metrics and in the
// server's log. Thread-safe (the store is).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "store_results.h"

namespace tessera::server {

struct TaskLiveness {
    std::optional<std::int64_t> last_merge_at;  // the return time of the newest result merged
    // Since the first result returned after the last merge (0 when none came back since).
    std::int64_t seconds_without_merge = 0;
    bool stalled = false;
    std::map<std::string, std::int64_t> refusals;  // since the last merge, by reason; filled when stalled
};

common::Result<TaskLiveness> task_liveness(ResultStore& store, const std::string& task_id, std::int64_t now);

// "merged nothing for 412 s while results came back; refused since its last merge: misaligned 9"
std::string describe_stall(const std::string& task_id, const TaskLiveness& liveness);

}  // namespace tessera::server
