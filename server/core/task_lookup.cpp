// Task lookups: record + parsed config, with the task named in errors.
#include "task_lookup.h"

namespace tessera::server {
namespace {

common::Result<TaskView> view_of(TaskRecord record) {
    auto config = parse_task_config(record.config_json);
    if (!config) return common::with_context("task '" + record.id + "' config", config.error());
    return TaskView{std::move(record), std::move(*config)};
}

}  // namespace

common::Result<TaskView> load_task(Store& store, const std::string& task_id) {
    auto record = store.task(task_id);
    if (!record) return record.error();
    if (!*record) return common::make_error("no task '" + task_id + "'");
    return view_of(std::move(**record));
}

common::Result<std::optional<TaskView>> load_current_task(Store& store) {
    auto record = store.current_task();
    if (!record) return record.error();
    if (!*record) return std::optional<TaskView>();
    auto view = view_of(std::move(**record));
    if (!view) return view.error();
    return std::optional<TaskView>(std::move(*view));
}

}  // namespace tessera::server
