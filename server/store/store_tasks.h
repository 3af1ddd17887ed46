// The store's tasks and their shards (store_tasks.cpp). One part of Store (store.h): a component
// given only this part sees only these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

class TaskStore : protected virtual StoreCore {
public:
    // Tasks, shards, model versions.
    common::Status create_task(const TaskRecord& task, const std::vector<ShardRecord>& shards,
                               const VersionRecord& version0);
    common::Result<std::optional<TaskRecord>> current_task();  // the newest unfinished task
    common::Result<std::optional<TaskRecord>> task(const std::string& id);
    common::Result<std::vector<TaskRecord>> tasks();
    // Pausing, resuming or finishing a task (an event records it).
    common::Status set_task_state(const std::string& id, TaskState state, std::int64_t now);
    // The task's share of work among the running tasks (the scheduler draws by weight).
    common::Status set_task_weight(const std::string& id, double weight);
    // The task's assignments not settled yet: issued, or returned and not yet merged or refused.
    common::Result<std::int64_t> results_in_flight(const std::string& task_id);
    // Whether the assignment's volunteer returned a result of the same task before this one.
    common::Result<bool> returned_before(const AssignmentRecord& a);
    common::Result<std::vector<ShardRecord>> shards(const std::string& task_id);

protected:
    TaskStore() = default;
};

}  // namespace tessera::server
