// Task lookups: record + parsed config, with the task named in errors.
#include "task_lookup.h"

namespace tessera::server {

common::Result<TaskView> task_view(TaskRecord record) {
    auto config = parse_task_config(record.config_json);
    if (!config) return common::with_context("task '" + record.id + "' config", config.error());
    return TaskView{std::move(record), std::move(*config)};
}

common::Result<TaskView> TaskConfigCache::view(TaskRecord record) {
    {
        std::lock_guard lock(mutex_);
        if (auto found = configs_.find(record.id); found != configs_.end())
            return TaskView{std::move(record), found->second};
    }
    auto parsed = task_view(std::move(record));
    if (!parsed) return parsed.error();
    std::lock_guard lock(mutex_);
    configs_.emplace(parsed->record.id, parsed->config);
    return parsed;
}

common::Result<TaskView> load_task(TaskStore& store, const std::string& task_id) {
    auto record = store.task(task_id);
    if (!record) return record.error();
    if (!*record) return common::make_error("no task '" + task_id + "'");
    return task_view(std::move(**record));
}

common::Result<std::optional<TaskView>> load_current_task(TaskStore& store) {
    auto record = store.current_task();
    if (!record) return record.error();
    if (!*record) return std::optional<TaskView>();
    auto view = task_view(std::move(**record));
    if (!view) return view.error();
    return std::optional<TaskView>(std::move(*view));
}

std::optional<TaskState> state_for_action(std::string_view action) {
    if (action == "pause") return TaskState::Paused;
    if (action == "resume") return TaskState::Active;
    if (action == "finish") return TaskState::Finished;
    return std::nullopt;
}

}  // namespace tessera::server
