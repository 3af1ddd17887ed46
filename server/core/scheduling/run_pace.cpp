// A task's run position and concurrency, cached per task (run_pace.h).
#include "run_pace.h"

#include <algorithm>

namespace tessera::server {

common::Result<RunPace> RunPaceCache::pace(const TaskConfig& config, std::int64_t now) {
    {
        std::lock_guard lock(mutex_);
        auto found = entries_.find(config.task_id);
        if (found != entries_.end() && now - found->second.read_at < refresh_s_ && now >= found->second.read_at)
            return found->second.pace;
    }
    auto progress = store_.run_progress(config.task_id, now - kVolunteerActiveWindowS);  // outside the lock
    if (!progress) return progress.error();
    RunPace pace{progress->steps_merged * config.batch_size, std::max<std::int64_t>(1, progress->volunteers),
                 progress->fastest_samples_per_s};
    std::lock_guard lock(mutex_);
    entries_[config.task_id] = {pace, now};
    return pace;
}

void stamp_schedule(const TaskConfig& config, const RunPace& pace, common::Hyperparameters& hyper) {
    if (!config.lr_schedule) return;
    hyper.schedule = config.lr_schedule;
    hyper.schedule_from = std::min(pace.samples_merged, common::kMaxSafeInteger);
    const auto span = pace.concurrency * hyper.local_steps * hyper.batch_size;
    hyper.schedule_to = std::min(hyper.schedule_from + span, common::kMaxSafeInteger);
}

}  // namespace tessera::server
