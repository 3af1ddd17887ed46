// The aggregator: the single writer of the model. Its own thread takes accepted results in
// acceptance order, feeds them to the task's merge policy and, whenever the model changes,
// writes the version's files (atomically) before committing it to the database. Without
// downlink patches every version is a full checkpoint. With them (common/model_patch.h) a
// version writes its patch only, and a full checkpoint (true model, published model, policy
// state) comes every `checkpoint_every` versions or `checkpoint_interval_s` seconds and at
// stop; the delta files of the results merged since the last checkpoint are kept, as the
// true model's log. It also schedules the validation-loss curve. On start it loads the last
// checkpoint, merges the logged results again in their order (the published model advances by
// the stored patches and is checked against its hash), and queues accepted results not merged
// yet; a commit that fails does the same in place, after `retry_s`, so a result is never merged
// twice nor lost. With an `ema_decay` it keeps the versions' EMA (model_ema.h), saved with the
// policy's state at checkpoints and moved on again by the replay. Every evaluated loss of the
// curve (or of the fleet simulator) goes to the divergence guard (divergence_guard.h): when it
// trips, the aggregator returns to the best evaluated version's model as a new version (always
// a full checkpoint, which saves the guard's state: a restart keeps the cut learning rate),
// starts the policy afresh at the cut rate and queues its buffered results again; past the
// guard's recoveries it also pauses the task. Each time it logs an error, records a
// `divergence_recovered` or `divergence_paused` event and the setting `divergence/<task>` the
// dashboard shows (docs/operations.md, "When a task diverges").
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
#include <vector>

#include "blob_store.h"
#include "clock.h"
#include "curve_evaluator.h"
#include "divergence_guard.h"
#include "executor.h"
#include "merge_policy.h"
#include "model_ema.h"
#include "model_probe.h"
#include "protocol.h"
#include "published_models.h"
#include "result_files.h"
#include "store.h"
#include "task_lookup.h"

namespace tessera::server {

struct AggregatorHooks {
    std::function<void(double)> merge_timer;  // how long each accepted result took, seconds
    std::function<void()> commit_failed;      // a new version could not be written
    // The published model of a version loaded at start or just committed: what volunteers see
    // (the copy detector sketches it).
    std::function<void(const std::string& task_id, std::int64_t version, const common::NamedTensors& model)>
        model_committed;
    double retry_s = 5;  // after a failed commit, merge again this much later
    // With downlink patches: a full checkpoint every this many versions or seconds, whichever
    // comes first (docs/operations.md, "Checkpoints and retention").
    std::int64_t checkpoint_every = 20;
    std::int64_t checkpoint_interval_s = 300;
    bool checkpoint_at_stop = true;  // false: stop as kill -9 would (tests of the replay)
    // Retention: the files of versions before the newest this many checkpoints are deleted
    // (pinned ones and those live units need are kept); 0 keeps everything.
    std::int64_t keep_checkpoints = 3;
    // Commits only while this lease is the process's (aggregator_election.h); none: always.
    std::optional<LeaseClaim> fence;
};

class Aggregator {
public:
    Aggregator(Store& store, BlobStore& blobs, PublishedModels& published_models, ResultFiles& results,
               std::shared_ptr<ProbePool> probes, Executor executor, Clock clock, AggregatorHooks hooks = {});
    ~Aggregator();

    // Loads the task's current model and starts the thread; queues unmerged accepted results.
    common::Status start(const std::string& task_id);
    // An accepted result to merge, as the store's accepted_after gave it.
    void enqueue(AcceptedResult result);
    // An evaluated loss of committed version `version`, whose model `model` is (any thread): the
    // divergence guard judges it on the aggregator's thread.
    void note_evaluation(std::int64_t version, double loss, CurveEvaluator::Model model);
    // Finishes the queue's current item, writes a checkpoint of the current version if it is
    // not one (and `checkpoint`: false when another process leads now), and stops.
    void stop(bool checkpoint = true);
    // Blocks until the queue is empty and nothing is being merged (tests and shutdown). With
    // `through_retries` false it also returns while a failed commit waits for its retry (the
    // results it holds are replayed at the next start).
    void wait_idle(bool through_retries = true);
    std::int64_t version() const { return version_.load(); }
    // The acceptance sequence number (assignments.accepted_seq) through which the accepted
    // results were queued at start: whoever feeds enqueue() goes on after it.
    std::int64_t accepted_through() const { return accepted_through_.load(); }
    // A copy of the true model; only while the aggregator is idle (after wait_idle).
    std::shared_ptr<const common::NamedTensors> model_when_idle() const {
        return std::make_shared<const common::NamedTensors>(model_);
    }

private:
    struct Evaluation {
        std::int64_t version = 0;
        double loss = 0;
        CurveEvaluator::Model model;
    };
    // Evaluations handed over by the curve's jobs, which may outlive the aggregator.
    struct Inbox {
        std::mutex mutex;
        Aggregator* target = nullptr;
    };

    void run();
    // The guard's judgement of one evaluation, and what the aggregator does when it trips.
    void judge(const Evaluation& evaluation);
    common::Status act_on(const GuardVerdict& verdict);
    struct DivergenceReport {
        const GuardVerdict& verdict;
        GuardAction action;
        bool returned;  // to the best evaluated model, as a new version
        std::int64_t diverged_at;
        double lr_before;
    };
    common::Status report_divergence(const DivergenceReport& report);
    // Model, policy state and version from committed version `version`: its last checkpoint,
    // then the results merged since.
    common::Status load_committed(std::int64_t version);
    // The files of the checkpoint `start`: the true model, the published one (with patches) and
    // the saved policy, EMA and guard state.
    struct CheckpointStart {
        common::NamedTensors model;
        std::optional<common::NamedTensors> published;
        std::int64_t published_version = 0;
        SavedState saved;
    };
    common::Result<CheckpointStart> read_checkpoint(const VersionRecord& start);
    common::Status replay(std::int64_t after, std::int64_t through);
    // Back to the last committed version with every accepted, unmerged result queued again.
    common::Status restore_committed();
    common::Status merge_one(const AcceptedResult& result);
    // merge_one inside the worker's exception boundary: a throw is logged, counted and answered
    // as a failed commit is (back to the committed version, merged again after retry_s).
    common::Status merge_guarded(const AcceptedResult& result);
    // `force_checkpoint`: a full checkpoint, published at once (the guard's return).
    common::Status commit(std::vector<std::string> merged, bool force_checkpoint = false);
    // The files of a full checkpoint at `version` beside the published model: that model's file
    // if not stored yet, the true model (with patches) and the policy's state (if any).
    struct CheckpointFiles {
        std::optional<std::string> state_sha256;
        std::optional<std::string> optimizer_sha256;
    };
    common::Result<CheckpointFiles> write_checkpoint_files(std::int64_t version, const common::BlobRef& published_blob,
                                                           std::int64_t published_version,
                                                           const std::optional<common::NamedTensors>& ema);
    // Moves the EMA on to `version`, just made from model_.
    common::Status update_ema(std::int64_t version);
    // Makes the current version a checkpoint (with patches, at stop).
    common::Status checkpoint_current();
    // Frees the logged results once a checkpoint covers them, and applies retention.
    void checkpointed(std::int64_t version, std::int64_t at);
    common::Status retain();
    std::function<CurveEvaluator::Model()> snapshot();

    Store& store_;
    BlobStore& blobs_;
    PublishedModels& published_models_;
    ResultFiles& results_;
    std::shared_ptr<ProbePool> probes_;
    Executor executor_;
    Clock clock_;
    AggregatorHooks hooks_;

    TaskView task_;
    common::NamedTensors model_;                     // θ: what the results are merged into
    std::optional<common::NamedTensors> published_;  // θ̂ with downlink patches: what volunteers hold
    std::int64_t published_version_ = 0;             // the version θ̂ was last published at
    common::BlobRef published_blob_;                 // and its checkpoint
    std::unique_ptr<MergePolicy> policy_;
    std::optional<common::NamedTensors> ema_;  // with the task's ema_decay > 0: the EMA of the versions
    std::atomic<std::int64_t> version_{0};
    std::atomic<std::int64_t> accepted_through_{0};
    std::shared_ptr<CurveEvaluator> curve_;
    std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
    DivergenceGuard guard_;
    CurveEvaluator::Model best_model_;  // where the guard returns to: the best evaluated since start
    double best_model_loss_ = 0;
    std::int64_t best_model_version_ = -1;
    std::int64_t checkpoint_version_ = 0;        // the last full checkpoint
    std::int64_t checkpoint_at_ = 0;             // and when it was written (or loaded)
    std::vector<std::string> since_checkpoint_;  // results merged after it: their files are kept
    bool started_ = false;
    bool changed_since_idle_ = false;
    bool retry_pending_ = false;  // a commit failed: wait hooks_.retry_s before merging again
    bool retrying_ = false;       // waiting for that retry (guarded by mutex_)

    std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<AcceptedResult> queue_;
    std::deque<Evaluation> evaluations_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace tessera::server
