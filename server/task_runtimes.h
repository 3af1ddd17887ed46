// The tasks this process serves, each with what is its own: probes on its validation data, its
// aggregator (run here while this process holds the task's lease: aggregator_election.h) and
// what the dashboard shows of it (its gallery). A watcher follows the tasks table: a task
// created while the server runs is served from the next poll on (the scheduler offers only
// tasks served here), and a finished task is dropped once none of its results is in flight
// (units issued before it finished still come back, are validated and merged). Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "aggregator_election.h"
#include "dashboard.h"
#include "model_probe.h"
#include "task_lookup.h"

namespace tessera::server {

struct TaskRuntime {
    TaskView task;  // as when this process started serving it
    std::shared_ptr<ProbePool> probes;
    std::unique_ptr<AggregatorElection> aggregator;
    std::shared_ptr<const TaskFacts> facts;
};

class TaskRuntimes {
public:
    // Builds and starts a task's runtime; stops one (its aggregator checkpoints and lets go of
    // the lease).
    using Starter = std::function<common::Result<std::shared_ptr<TaskRuntime>>(const TaskView&)>;
    using Stopper = std::function<void(TaskRuntime&)>;

    TaskRuntimes(TaskStore& tasks, Starter start, Stopper stop);
    ~TaskRuntimes();

    // Serves the tasks to serve and drops the others. A task that fails to start is an error
    // (and tried again at the next refresh).
    common::Status refresh();
    // refresh() every `poll` on a thread of its own, until stop().
    void watch(std::chrono::milliseconds poll);
    // Stops the watcher, then every runtime.
    void stop();

    std::shared_ptr<TaskRuntime> find(const std::string& task_id) const;
    std::vector<std::shared_ptr<TaskRuntime>> all() const;

private:
    // Served: active and paused tasks, and finished ones with results in flight.
    common::Result<bool> should_serve(const TaskRecord& record);

    TaskStore& tasks_;
    Starter start_;
    Stopper stop_;
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<TaskRuntime>> running_;
    std::mutex refreshing_;  // one refresh at a time
    std::condition_variable changed_;
    bool stopping_ = false;
    std::thread watcher_;
};

}  // namespace tessera::server
