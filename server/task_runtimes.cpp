// TaskRuntimes: following the tasks table.
#include "task_runtimes.h"

#include "logger.h"
#include "worker_guard.h"

namespace tessera::server {

TaskRuntimes::TaskRuntimes(TaskStore& tasks, Starter start, Stopper stop)
    : tasks_(tasks), start_(std::move(start)), stop_(std::move(stop)) {}

TaskRuntimes::~TaskRuntimes() { stop(); }

common::Result<bool> TaskRuntimes::should_serve(const TaskRecord& record) {
    if (record.state != TaskState::Finished) return true;
    auto in_flight = tasks_.results_in_flight(record.id);
    if (!in_flight) return in_flight.error();
    return *in_flight > 0;
}

common::Status TaskRuntimes::refresh() {
    std::lock_guard serial(refreshing_);
    auto records = tasks_.tasks();
    if (!records) return records.error();
    std::set<std::string> wanted;
    common::Status outcome;
    for (const auto& record : *records) {
        auto serve = should_serve(record);
        if (!serve) return serve.error();
        if (!*serve) continue;
        wanted.insert(record.id);
        if (find(record.id)) continue;
        auto view = task_view(record);
        auto runtime = view ? start_(*view) : common::Result<std::shared_ptr<TaskRuntime>>(view.error());
        if (!runtime) {
            outcome = common::with_context("task '" + record.id + "'", runtime.error());
            continue;
        }
        std::lock_guard lock(mutex_);
        running_[record.id] = std::move(*runtime);
    }
    std::vector<std::shared_ptr<TaskRuntime>> dropped;
    {
        std::lock_guard lock(mutex_);
        for (auto it = running_.begin(); it != running_.end();)
            if (wanted.count(it->first)) {
                ++it;
            } else {
                dropped.push_back(std::move(it->second));
                it = running_.erase(it);
            }
    }
    for (auto& runtime : dropped) {
        common::process_log().info("task_dropped", "task " + runtime->task.record.id + " is finished; no longer served",
                                   {{"task_id", runtime->task.record.id}});
        stop_(*runtime);
    }
    return outcome;
}

void TaskRuntimes::watch(std::chrono::milliseconds poll) {
    watcher_ = std::thread([this, poll] {
        std::unique_lock lock(mutex_);
        while (!stopping_) {
            if (changed_.wait_for(lock, poll, [this] { return stopping_; })) break;
            lock.unlock();
            common::run_guarded("task watcher", [this] {
                if (auto status = refresh(); !status)
                    common::process_log().error("tasks", "tasks: " + status.message());
            });
            lock.lock();
        }
    });
}

void TaskRuntimes::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (watcher_.joinable()) watcher_.join();
    std::map<std::string, std::shared_ptr<TaskRuntime>> running;
    {
        std::lock_guard lock(mutex_);
        running.swap(running_);
    }
    for (auto& [id, runtime] : running) stop_(*runtime);
}

std::shared_ptr<TaskRuntime> TaskRuntimes::find(const std::string& task_id) const {
    std::lock_guard lock(mutex_);
    auto found = running_.find(task_id);
    return found == running_.end() ? nullptr : found->second;
}

std::vector<std::shared_ptr<TaskRuntime>> TaskRuntimes::all() const {
    std::lock_guard lock(mutex_);
    std::vector<std::shared_ptr<TaskRuntime>> list;
    for (const auto& [id, runtime] : running_) list.push_back(runtime);
    return list;
}

}  // namespace tessera::server
