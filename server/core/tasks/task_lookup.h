// Reading a task's record together with its parsed configuration.
#pragma once

#include <optional>
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
common::Result<TaskView> load_task(TaskStore& store, const std::string& task_id);
// The newest unfinished task, if any.
common::Result<std::optional<TaskView>> load_current_task(TaskStore& store);
// The state an operator's action moves a task to: "pause", "resume", "finish"; none for others.
std::optional<TaskState> state_for_action(std::string_view action);

}  // namespace tessera::server
