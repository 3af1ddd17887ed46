// Reading a task's record together with its parsed configuration.
#pragma once

#include <optional>

#include "store.h"
#include "task_config.h"

namespace tessera::server {

struct TaskView {
    TaskRecord record;
    TaskConfig config;
};

common::Result<TaskView> load_task(Store& store, const std::string& task_id);
// The newest unfinished task, if any.
common::Result<std::optional<TaskView>> load_current_task(Store& store);

}  // namespace tessera::server
