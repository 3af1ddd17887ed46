// Reading a task's record together with its parsed configuration.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "store.h"
#include "task_config.h"

namespace tessera::server {

struct TaskView {
    TaskRecord record;
    TaskConfig config;
};

// A task record with its parsed configuration (the task named in errors).
common::Result<TaskView> task_view(TaskRecord record);

// Tasks' configurations parsed once each (a task's configuration never changes). Thread-safe.
class TaskConfigCache {
public:
    // As task_view, the configuration parsed on the task's first call only.
    common::Result<TaskView> view(TaskRecord record);

private:
    std::mutex mutex_;
    std::map<std::string, TaskConfig> configs_;
};
common::Result<TaskView> load_task(TaskStore& store, const std::string& task_id);
// The newest unfinished task, if any.
common::Result<std::optional<TaskView>> load_current_task(TaskStore& store);
// The state an operator's action moves a task to: "pause", "resume", "finish"; none for others.
std::optional<TaskState> state_for_action(std::string_view action);

}  // namespace tessera::server
