// Task liveness from the stall guard's figures.
#include "liveness.h"

#include <array>

#include "rejection_reasons.h"
#include "stall_guard.h"

namespace tessera::server {

common::Result<TaskLiveness> task_liveness(ResultStore& store, const std::string& task_id, std::int64_t now) {
    auto figures = store.stall_figures(task_id, "");
    if (!figures) return figures.error();
    TaskLiveness liveness;
    liveness.last_merge_at = figures->last_merge_at;
    if (figures->first_return_at) liveness.seconds_without_merge = now - *figures->first_return_at;
    liveness.stalled = liveness.seconds_without_merge >= StallGuard::kStallSeconds;
    if (!liveness.stalled) return liveness;
    for (auto why : reason::kAll) {
        auto refused = store.stall_figures(task_id, std::string(why));
        if (!refused) return refused.error();
        if (refused->refusals > 0) liveness.refusals[std::string(why)] = refused->refusals;
    }
    return liveness;
}

std::string describe_stall(const std::string& task_id, const TaskLiveness& liveness) {
    std::string text = "task " + task_id + " merged nothing for " + std::to_string(liveness.seconds_without_merge) +
                       " s while results came back; refused since its last merge:";
    if (liveness.refusals.empty()) return text + " none (results wait to be judged or merged)";
    for (const auto& [why, count] : liveness.refusals) text += " " + why + " " + std::to_string(count);
    return text;
}

}  // namespace tessera::server
