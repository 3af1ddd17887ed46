// The transitioner (BOINC's name): moves work along by time, task by task with each task's
// settings. Overdue assignments time out (their unit is reissued, or retired after too many
// failures) and a validated replica whose twin never came back is accepted alone — each row
// claimed, so that of several processes' transitioners one moves it; a task that
// merges nothing while results come back is reported once, when it begins and when it ends
// (liveness.h). A result whose validation failed with an error is the validation stage's
// (validation_stage.h: its claim lapses). Run periodically from one thread; tests call tick()
// with their clock.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "clock.h"
#include "store.h"
#include "validator.h"

namespace tessera::server {

struct TickReport {
    std::size_t timed_out = 0;
    std::size_t retired = 0;
    std::size_t accepted_alone = 0;
    std::vector<std::string> task_errors;  // "task ID: what failed", one per task whose tick failed
    // Tasks that began to merge nothing while results come back (liveness.h: describe_stall),
    // and tasks that merged again, since the last tick.
    std::vector<std::string> stalls;
    std::vector<std::string> merging_again;
};

class Transitioner {
public:
    // The tasks it walks and the results it moves: the store's two parts it uses. `holder`:
    // this process (process_holder.h), the holder of the lonely results it claims.
    Transitioner(TaskStore& tasks, ResultStore& results, Validator& validator, Clock clock, std::string holder)
        : tasks_(tasks), results_(results), validator_(validator), clock_(std::move(clock)),
          holder_(std::move(holder)) {}
    common::Result<TickReport> tick();

private:
    common::Status tick_task(const TaskRecord& record, std::int64_t now, TickReport& report);
    common::Status note_liveness(const TaskRecord& record, std::int64_t now, TickReport& report);

    TaskStore& tasks_;
    ResultStore& results_;
    Validator& validator_;
    Clock clock_;
    std::string holder_;
    std::set<std::string> stalled_;  // tasks reported as merging nothing
};

}  // namespace tessera::server
