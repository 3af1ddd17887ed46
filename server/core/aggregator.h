// The aggregator: the single writer of the model. Its own thread takes accepted results in
// acceptance order, feeds them to the task's merge policy and, whenever the model changes,
// writes the checkpoint blob (atomically) before committing the new version to the database;
// with downlink patches it also publishes the version's patch (common/model_patch.h).
// It also schedules the periodic validation-loss evaluation. On start it resumes from the
// last committed version and replays accepted results not merged yet; a commit that fails
// (checkpoint or version row) does the same in place, after `retry_s`, so a result is never
// merged twice nor lost.
// Thread-safe: enqueue() from any thread; everything else runs on the aggregator's thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "blob_store.h"
#include "curve_evaluator.h"
#include "merge_policy.h"
#include "model_probe.h"
#include "protocol.h"
#include "result_files.h"
#include "store.h"
#include "task_lookup.h"
#include "validator.h"

namespace tessera::server {

struct AggregatorHooks {
    std::function<void(double)> merge_timer;  // how long each accepted result took, seconds
    std::function<void()> commit_failed;      // a new version could not be written
    // The published model of a version loaded at start or just committed: what volunteers see
    // (the copy detector sketches it).
    std::function<void(const std::string& task_id, std::int64_t version, const common::NamedTensors& model)>
        model_committed;
    double retry_s = 5;  // after a failed commit, merge again this much later
};

class Aggregator {
public:
    Aggregator(Store& store, BlobStore& blobs, ResultFiles& results, ProbePool& probes, Executor executor, Clock clock,
               AggregatorHooks hooks = {});
    ~Aggregator();

    // Loads the task's current model and starts the thread; queues unmerged accepted results.
    common::Status start(const std::string& task_id);
    void enqueue(const std::string& assignment_id);
    // Finishes the queue's current item and stops.
    void stop();
    // Blocks until the queue is empty and nothing is being merged (tests and shutdown). With
    // `through_retries` false it also returns while a failed commit waits for its retry (the
    // results it holds are replayed at the next start).
    void wait_idle(bool through_retries = true);
    std::int64_t version() const { return version_.load(); }

private:
    void run();
    // Model, policy state and version from committed version `version`.
    common::Status load_committed(std::int64_t version);
    // Back to the last committed version with every accepted, unmerged result queued again.
    common::Status restore_committed();
    common::Status merge_one(const std::string& assignment_id);
    common::Status commit(std::vector<std::string> merged);

    Store& store_;
    BlobStore& blobs_;
    ResultFiles& results_;
    ProbePool& probes_;
    Executor executor_;
    Clock clock_;
    AggregatorHooks hooks_;

    TaskView task_;
    common::NamedTensors model_;                     // θ: what the results are merged into
    std::optional<common::NamedTensors> published_;  // θ̂ with downlink patches: what volunteers hold
    std::int64_t published_version_ = 0;             // the version θ̂ was last published at
    common::BlobRef published_blob_;                 // and its checkpoint
    std::unique_ptr<MergePolicy> policy_;
    std::atomic<std::int64_t> version_{0};
    std::unique_ptr<CurveEvaluator> curve_;
    bool changed_since_idle_ = false;
    bool retry_pending_ = false;  // a commit failed: wait hooks_.retry_s before merging again
    bool retrying_ = false;       // waiting for that retry (guarded by mutex_)

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::string> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tessera::server
