// Where a task's run stands, for the units the scheduler issues: the samples of its results
// accepted for merging (the position of the run-wide learning-rate schedule,
// common/lr_schedule.h) and the volunteers working on it (its concurrency). Read from the
// store at most every few seconds per task, so that a work request does not scan the task's
// results. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "store.h"
#include "task_config.h"

namespace tessera::server {

struct RunPace {
    std::int64_t samples_merged = 0;  // local steps × batch of the results accepted for merging
    std::int64_t concurrency = 1;     // distinct volunteers issued a unit recently (at least 1)
    double fastest_samples_per_s = 0;  // the fastest of them, as last reported (0: none known)
};

class RunPaceCache {
public:
    explicit RunPaceCache(HistoryStore& store, std::int64_t refresh_s = 5) : store_(store), refresh_s_(refresh_s) {}
    common::Result<RunPace> pace(const TaskConfig& config, std::int64_t now);

private:
    struct Entry {
        RunPace pace;
        std::int64_t read_at = 0;
    };
    HistoryStore& store_;
    std::int64_t refresh_s_;
    std::mutex mutex_;  // guards entries_ (never held while the store is read)
    std::map<std::string, Entry> entries_;
};

// The schedule fields of a unit of `local_steps` steps issued at `pace`: the task's schedule,
// from = the samples merged, to = from + concurrency × local_steps × batch (where the fleet
// should stand when the unit returns). Nothing when the task has no schedule.
void stamp_schedule(const TaskConfig& config, const RunPace& pace, common::Hyperparameters& hyper);

}  // namespace tessera::server
