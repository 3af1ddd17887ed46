// The transitioner (BOINC's name): moves work along by time, task by task with each task's
// settings. Overdue assignments time out (their unit is reissued, or retired after too many
// failures), a validated replica whose twin never came back is accepted alone, and a result whose validation failed (an error, not
// a verdict) is validated again; a task that merges nothing while results come back is
// reported once, when it begins and when it ends (liveness.h). Run periodically from one
// thread; tests call tick() with their clock.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "store.h"
#include "validator.h"

namespace tessera::server {

struct TickReport {
    std::size_t timed_out = 0;
    std::size_t retired = 0;
    std::size_t accepted_alone = 0;
    std::size_t revalidated = 0;
    std::vector<std::string> task_errors;  // "task ID: what failed", one per task whose tick failed
    // Tasks that began to merge nothing while results come back (liveness.h: describe_stall),
    // and tasks that merged again, since the last tick.
    std::vector<std::string> stalls;
    std::vector<std::string> merging_again;
};

// A returned result still without a verdict this long after its upload is validated again.
constexpr std::int64_t kRevalidateAfterS = 60;

class Transitioner {
public:
    // `executor` runs the validations that are tried again.
    Transitioner(Store& store, Validator& validator, Executor executor, Clock clock)
        : store_(store), validator_(validator), executor_(std::move(executor)), clock_(std::move(clock)) {}
    common::Result<TickReport> tick();

private:
    common::Status tick_task(const TaskRecord& record, std::int64_t now, TickReport& report);
    common::Status note_liveness(const TaskRecord& record, std::int64_t now, TickReport& report);

    Store& store_;
    Validator& validator_;
    Executor executor_;
    Clock clock_;
    std::set<std::string> stalled_;  // tasks reported as merging nothing
};

}  // namespace tessera::server
