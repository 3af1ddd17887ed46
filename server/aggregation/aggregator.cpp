// Aggregator: its thread, the merge of each accepted result and the commit of each version
// (aggregator_checkpoints.cpp loads and writes checkpoints; aggregator_divergence.cpp acts on
// the divergence guard).
#include "aggregator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <boost/json.hpp>

#include "checkpoint.h"
#include "clock.h"
#include "executor.h"
#include "logger.h"
#include "model_patch.h"
#include "model_cache.h"
#include "tensor_math.h"
#include "worker_guard.h"
#include "safetensors.h"
#include "sha256.h"

namespace tessera::server {
namespace {

// Merging has paused when no result has arrived for this long (docs/architecture.md).
constexpr auto kMergePause = std::chrono::milliseconds(250);

}  // namespace

Aggregator::Aggregator(Store& store, BlobStore& blobs, PublishedModels& published_models, ResultFiles& results,
                       std::shared_ptr<ProbePool> probes, Executor executor, Clock clock, AggregatorHooks hooks)
    : store_(store), blobs_(blobs), published_models_(published_models), results_(results), probes_(std::move(probes)),
      executor_(std::move(executor)), clock_(std::move(clock)), hooks_(std::move(hooks)) {}

Aggregator::~Aggregator() { stop(); }

common::Status Aggregator::start(const std::string& task_id) {
    auto task = load_task(store_, task_id);
    if (!task) return task.error();
    task_ = std::move(*task);
    if (auto status = restore_committed(); !status) return status;
    inbox_->target = this;
    auto observer = [inbox = inbox_](std::int64_t version, double loss, const CurveEvaluator::Model& model) {
        std::lock_guard lock(inbox->mutex);
        if (inbox->target) inbox->target->note_evaluation(version, loss, model);
    };
    curve_ = std::make_shared<CurveEvaluator>(store_, probes_, executor_, clock_, task_id, task_.config.eval_samples,
                                              task_.config.eval_interval_s, task_.config.eval_full_interval_s,
                                              std::move(observer));
    auto record = store_.version(task_id, version_);
    if (!record) return record.error();
    if (!*record || !(*record)->validation_loss)
        curve_->version_committed(version_, true, snapshot());
    else  // the guard's first point after a restart, and its return point unless it diverged
        evaluations_.push_back({version_.load(), *(*record)->validation_loss, snapshot()()});
    started_ = true;
    thread_ = std::thread([this] { run(); });
    return {};
}

std::function<CurveEvaluator::Model()> Aggregator::snapshot() {
    return [this] { return std::make_shared<const common::NamedTensors>(model_); };
}

common::Status Aggregator::update_ema(std::int64_t version) {
    if (!ema_) return {};
    return ema_update(*ema_, model_, ema_decay_at(task_.config.ema_decay, version));
}

void Aggregator::enqueue(AcceptedResult result) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(result));
    }
    changed_.notify_all();
}

void Aggregator::note_evaluation(std::int64_t version, double loss, CurveEvaluator::Model model) {
    {
        std::lock_guard lock(mutex_);
        evaluations_.push_back({version, loss, std::move(model)});
    }
    changed_.notify_all();
}

void Aggregator::stop(bool checkpoint) {
    {
        std::lock_guard lock(inbox_->mutex);
        inbox_->target = nullptr;
    }
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (!thread_.joinable()) return;
    thread_.join();
    if (started_ && checkpoint && hooks_.checkpoint_at_stop && version_ > checkpoint_version_)
        if (auto status = checkpoint_current(); !status)
            common::process_log().error("checkpoint", "aggregator: the checkpoint at stop: " + status.message() +
                                                          " (the next start replays from the last one)");
}

void Aggregator::wait_idle(bool through_retries) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] {
        return (queue_.empty() && evaluations_.empty() && !busy_) || stopping_ || (retrying_ && !through_retries);
    });
}

void Aggregator::run() {
    for (;;) {
        std::optional<AcceptedResult> next;
        std::deque<Evaluation> evaluations;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_ || !queue_.empty() || !evaluations_.empty(); });
            if (stopping_) return;
            evaluations.swap(evaluations_);
            if (!queue_.empty()) {
                next = std::move(queue_.front());
                queue_.pop_front();
            }
            busy_ = true;
        }
        // The guard first: a return it makes comes before the next merge.
        for (const auto& evaluation : evaluations) common::run_guarded("aggregator", [&] { judge(evaluation); });
        if (next) {
            auto started = std::chrono::steady_clock::now();
            auto merged = merge_guarded(*next);
            const auto& id = next->assignment_id;
            if (!merged)
                common::process_log().error("merge", "aggregator: " + id + ": " + merged.message(),
                                            {{"assignment_id", id}});
            if (hooks_.merge_timer)
                hooks_.merge_timer(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        }
        if (retry_pending_) {
            retry_pending_ = false;
            std::unique_lock lock(mutex_);
            retrying_ = true;
            changed_.notify_all();
            changed_.wait_for(lock, std::chrono::duration<double>(hooks_.retry_s), [&] { return stopping_; });
            retrying_ = false;
        }
        bool idle = false;
        {
            // The curve always ends at the current version: evaluate it once merging pauses,
            // that is once no result has come for kMergePause (under a steady stream of results
            // the queue empties between every two; evaluating then would evaluate non-stop).
            std::unique_lock lock(mutex_);
            auto more = [&] { return stopping_ || !queue_.empty() || !evaluations_.empty(); };
            idle = changed_since_idle_ ? !changed_.wait_for(lock, kMergePause, more) : queue_.empty();
        }
        if (idle && changed_since_idle_)
            common::run_guarded("aggregator", [&] { curve_->version_committed(version_, true, snapshot()); });
        if (idle) changed_since_idle_ = false;
        {
            std::lock_guard lock(mutex_);
            busy_ = false;
        }
        changed_.notify_all();
    }
}

common::Status Aggregator::merge_guarded(const AcceptedResult& result) {
    common::Status merged;
    if (common::run_guarded("aggregator", [&] { merged = merge_one(result); })) return merged;
    // The model in memory may hold part of the merge: back to the committed version, as after
    // a failed commit, and the result is merged again later (it is still accepted, not merged).
    retry_pending_ = true;
    common::Status restored;
    if (!common::run_guarded("aggregator", [&] { restored = restore_committed(); }) || !restored)
        return common::make_error("the merge threw, and restoring the committed version failed" +
                                  (restored ? std::string() : ": " + restored.message()));
    return common::make_error("the merge threw (back at version " + std::to_string(version_) + "; merged again in " +
                              std::to_string(hooks_.retry_s) + " s)");
}

// The result comes from accepted_after (this task's, accepted and not merged when read; only
// this aggregator merges it, and the commit re-checks its state).
common::Status Aggregator::merge_one(const AcceptedResult& result) {
    const auto& assignment_id = result.assignment_id;
    for (const auto& pending : policy_->pending_ids())
        if (pending == assignment_id) return {};  // replayed twice
    auto delta = results_.read(assignment_id, value_count(model_) + 1);
    if (!delta) return delta.error();
    // The concurrency stamped at acceptance, so that a replay merges as the first time did.
    IncomingDelta incoming{assignment_id, version_ - result.base_version, std::move(*delta), result.concurrency};
    auto outcome = policy_->add(model_, std::move(incoming));
    if (!outcome) return outcome.error();
    if (!outcome->model_changed) return {};
    auto committed = commit(std::move(outcome->merged_ids));
    if (committed) return {};
    // The model in memory holds results the database does not: go back to the committed one.
    retry_pending_ = true;
    if (hooks_.commit_failed) hooks_.commit_failed();
    if (auto restored = restore_committed(); !restored)
        return common::make_error(committed.message() +
                                  "; restoring the committed version failed too: " + restored.message());
    return common::make_error(committed.message() + " (back at version " + std::to_string(version_) +
                              "; its results are merged again in " + std::to_string(hooks_.retry_s) + " s)");
}

// Files first (atomic, fsynced), then the database row that points at them: a crash between
// the two leaves orphan files, never a row without its files. With patches the published
// model advances by the patch; its full file, the true model and the policy state are written
// at checkpoints only, and the merged results' files are kept until one covers them.
common::Status Aggregator::commit(std::vector<std::string> merged, bool force_checkpoint) {
    std::int64_t next = version_ + 1;
    auto now = clock_();
    VersionRecord record;
    record.task_id = task_.record.id;
    record.version = next;
    record.checkpoint = force_checkpoint || !published_ || next - checkpoint_version_ >= hooks_.checkpoint_every ||
                        now - checkpoint_at_ >= hooks_.checkpoint_interval_s;
    // Published at this version: every version without patches; with them, every
    // `publish_every` versions (the versions between keep the last published model).
    bool publish = force_checkpoint || !published_ || next - published_version_ >= task_.config.publish_every;
    if (published_ && publish) {
        auto patch = common::make_patch(model_, *published_, *task_.config.patches);
        if (!patch) return patch.error();
        auto patch_blob = blobs_.put(*patch);
        if (!patch_blob) return patch_blob.error();
        record.patch_sha256 = patch_blob->sha256;
        record.patch_bytes = patch_blob->bytes;
    }
    common::BlobRef blob = published_blob_;
    std::int64_t blob_version = published_version_;
    if (publish) {  // its hash always; its file at checkpoints (else when first asked for)
        auto bytes =
            common::write_checkpoint(published_ ? *published_ : model_, {task_.record.id, task_.config.model, next});
        if (!bytes) return bytes.error();
        blob = {common::sha256_hex(*bytes), static_cast<std::int64_t>(bytes->size())};
        blob_version = next;
        if (record.checkpoint)
            if (auto stored = blobs_.put(*bytes); !stored) return stored.error();
    }
    record.blob_sha256 = blob.sha256;
    record.blob_bytes = blob.bytes;
    // The EMA of version `next`; it replaces the current one once the version commits.
    auto next_ema = ema_;
    if (next_ema)
        if (auto status = ema_update(*next_ema, model_, ema_decay_at(task_.config.ema_decay, next)); !status)
            return status;
    if (record.checkpoint) {
        auto files = write_checkpoint_files(next, blob, blob_version, next_ema);
        if (!files) return files.error();
        record.state_sha256 = files->state_sha256;
        record.optimizer_sha256 = files->optimizer_sha256;
    }
    record.created_at = now;
    record.merged_results = static_cast<std::int64_t>(merged.size());
    if (auto status = store_.commit_version(record, merged, hooks_.fence); !status) return status;
    version_ = next;
    ema_ = std::move(next_ema);
    if (publish) {
        published_version_ = next;
        published_blob_ = blob;
        if (hooks_.model_committed) hooks_.model_committed(task_.record.id, next, published_ ? *published_ : model_);
    }
    since_checkpoint_.insert(since_checkpoint_.end(), merged.begin(), merged.end());
    if (record.checkpoint) checkpointed(next, now);
    changed_since_idle_ = true;
    curve_->version_committed(next, false, snapshot());
    return {};
}

}  // namespace tessera::server
