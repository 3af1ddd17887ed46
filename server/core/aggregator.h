// The aggregator: the single writer of the model. Its own thread takes accepted results in
// acceptance order, feeds them to the task's merge policy and, whenever the model changes,
// writes the checkpoint blob (atomically) before committing the new version to the database.
// It also schedules the periodic validation-loss evaluation. On start it resumes from the
// last committed version and replays accepted results not merged yet.
// Thread-safe: enqueue() from any thread; everything else runs on the aggregator's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "blob_store.h"
#include "curve_evaluator.h"
#include "merge_policy.h"
#include "model_probe.h"
#include "state_dir.h"
#include "store.h"
#include "task_lookup.h"
#include "validator.h"

namespace tessera::server {

class Aggregator {
public:
    // `merge_timer` (optional) is told how long each accepted result took, in seconds.
    Aggregator(Store& store, BlobStore& blobs, const StateDir& state, ProbePool& probes, Executor executor,
               Clock clock, std::function<void(double)> merge_timer = {});
    ~Aggregator();

    // Loads the task's current model and starts the thread; queues unmerged accepted results.
    common::Status start(const std::string& task_id);
    void enqueue(const std::string& assignment_id);
    // Finishes the queue's current item and stops.
    void stop();
    // Blocks until the queue is empty and nothing is being merged (tests and shutdown).
    void wait_idle();
    std::int64_t version() const { return version_.load(); }

private:
    void run();
    common::Status merge_one(const std::string& assignment_id);
    common::Status commit(std::vector<std::string> merged);

    Store& store_;
    BlobStore& blobs_;
    StateDir state_;
    ProbePool& probes_;
    Executor executor_;
    Clock clock_;
    std::function<void(double)> merge_timer_;

    TaskView task_;
    common::NamedTensors model_;
    std::unique_ptr<MergePolicy> policy_;
    std::atomic<std::int64_t> version_{0};
    std::unique_ptr<CurveEvaluator> curve_;
    bool changed_since_idle_ = false;

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::string> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tessera::server
