// Aggregator: merge loop, checkpoint-then-commit, evaluation scheduling.
#include "aggregator.h"

#include <chrono>
#include <iostream>

#include "checkpoint.h"
#include "model_patch.h"
#include "model_cache.h"
#include "result_files.h"
#include "curve_evaluator.h"

namespace tessera::server {
namespace {

// Merging has paused when no result has arrived for this long (docs/architecture.md).
constexpr auto kMergePause = std::chrono::milliseconds(250);

}  // namespace

Aggregator::Aggregator(Store& store, BlobStore& blobs, ResultFiles& results, ProbePool& probes, Executor executor,
                       Clock clock, AggregatorHooks hooks)
    : store_(store), blobs_(blobs), results_(results), probes_(probes), executor_(std::move(executor)),
      clock_(std::move(clock)), hooks_(std::move(hooks)) {}

Aggregator::~Aggregator() { stop(); }

common::Status Aggregator::start(const std::string& task_id) {
    auto task = load_task(store_, task_id);
    if (!task) return task.error();
    task_ = std::move(*task);
    if (auto status = restore_committed(); !status) return status;
    curve_ =
        std::make_unique<CurveEvaluator>(store_, blobs_, probes_, executor_, clock_, task_id, task_.config.eval_samples,
                                         task_.config.eval_interval_s, task_.config.eval_full_interval_s);
    auto record = store_.version(task_id, version_);
    if (!record) return record.error();
    if (!*record || !(*record)->validation_loss) curve_->version_committed(version_, true);
    thread_ = std::thread([this] { run(); });
    return {};
}

common::Status Aggregator::load_committed(std::int64_t version) {
    const auto& task_id = task_.record.id;
    auto record = store_.version(task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("task '" + task_id + "' has no version " + std::to_string(version));
    auto read_model = [&](const std::string& sha256) -> common::Result<common::NamedTensors> {
        auto bytes = blobs_.read(sha256, std::uint64_t{8} << 30);
        if (!bytes) return common::with_context("model version " + std::to_string(version), bytes.error());
        return common::read_checkpoint(*bytes);
    };
    auto model = read_model((*record)->state_sha256.value_or((*record)->blob_sha256));
    if (!model) return model.error();
    std::optional<common::NamedTensors> published;
    std::int64_t published_version = version;
    if (task_.config.patches) {
        auto read = (*record)->state_sha256 ? read_model((*record)->blob_sha256) : model;
        if (!read) return read.error();
        published = std::move(*read);
        auto versions = store_.versions_of_blob(task_id, (*record)->blob_sha256);
        if (!versions) return versions.error();
        if (*versions) published_version = (*versions)->first;
    }
    auto policy = make_merge_policy(task_.config.merge);
    if (!policy) return policy.error();
    if ((*record)->optimizer_sha256) {
        auto state_bytes = blobs_.read(*(*record)->optimizer_sha256, std::uint64_t{8} << 30);
        if (!state_bytes) return state_bytes.error();
        auto state = common::read_checkpoint(*state_bytes);
        if (!state) return state.error();
        if (auto status = (*policy)->load_optimizer_state(*state, *model); !status) return status;
    }
    model_ = std::move(*model);
    published_ = std::move(published);
    published_version_ = published_version;
    published_blob_ = {(*record)->blob_sha256, (*record)->blob_bytes};
    policy_ = std::move(*policy);
    version_ = version;
    if (hooks_.model_committed) hooks_.model_committed(task_id, version, published_ ? *published_ : model_);
    return {};
}

common::Status Aggregator::restore_committed() {
    auto task = store_.task(task_.record.id);
    if (!task) return task.error();
    if (!*task) return common::make_error("task '" + task_.record.id + "' is gone");
    if (auto status = load_committed((*task)->version); !status) return status;
    auto pending = store_.accepted_unmerged(task_.record.id);
    if (!pending) return pending.error();
    std::lock_guard lock(mutex_);
    queue_.clear();
    for (const auto& a : *pending) queue_.push_back(a.id);
    return {};
}

void Aggregator::enqueue(const std::string& assignment_id) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(assignment_id);
    }
    changed_.notify_all();
}

void Aggregator::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void Aggregator::wait_idle(bool through_retries) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return (queue_.empty() && !busy_) || stopping_ || (retrying_ && !through_retries); });
}

void Aggregator::run() {
    for (;;) {
        std::string id;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            id = queue_.front();
            queue_.pop_front();
            busy_ = true;
        }
        auto started = std::chrono::steady_clock::now();
        auto merged = merge_one(id);
        if (!merged) std::cerr << "aggregator: " << id << ": " << merged.message() << "\n";
        if (hooks_.merge_timer)
            hooks_.merge_timer(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
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
            auto more = [&] { return stopping_ || !queue_.empty(); };
            idle = changed_since_idle_ ? !changed_.wait_for(lock, kMergePause, more) : queue_.empty();
        }
        if (idle && changed_since_idle_) curve_->version_committed(version_, true);
        if (idle) changed_since_idle_ = false;
        {
            std::lock_guard lock(mutex_);
            busy_ = false;
        }
        changed_.notify_all();
    }
}

common::Status Aggregator::merge_one(const std::string& assignment_id) {
    auto found = store_.assignment(assignment_id);
    if (!found) return found.error();
    if (!*found || (*found)->state != AssignmentState::Accepted || (*found)->task_id != task_.record.id) return {};
    for (const auto& pending : policy_->pending_ids())
        if (pending == assignment_id) return {};  // replayed twice
    auto delta = results_.read(assignment_id, value_count(model_) + 1);
    if (!delta) return delta.error();
    IncomingDelta incoming{assignment_id, version_ - (*found)->base_version, std::move(*delta)};
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

// Checkpoint blobs first (atomic, fsynced), then the database row that points at them: a crash
// between the two leaves orphan files, never a row without its files. With patches the
// published model advances by the patch and is written beside the true one.
common::Status Aggregator::commit(std::vector<std::string> merged) {
    std::int64_t next = version_ + 1;
    common::CheckpointInfo info{task_.record.id, task_.config.model, next};
    VersionRecord record;
    record.task_id = task_.record.id;
    record.version = next;
    // Published at this version: every version without patches; with them, every
    // `publish_every` versions (the versions between keep the last published model).
    bool publish = !published_ || next - published_version_ >= task_.config.publish_every;
    if (published_) {
        auto state_bytes = common::write_checkpoint(model_, info);
        if (!state_bytes) return state_bytes.error();
        auto state_blob = blobs_.put(*state_bytes);
        if (!state_blob) return state_blob.error();
        record.state_sha256 = state_blob->sha256;
        record.blob_sha256 = published_blob_.sha256;
        record.blob_bytes = published_blob_.bytes;
    }
    if (published_ && publish) {
        auto patch = common::make_patch(model_, *published_, *task_.config.patches);
        if (!patch) return patch.error();
        auto patch_blob = blobs_.put(*patch);
        if (!patch_blob) return patch_blob.error();
        record.patch_sha256 = patch_blob->sha256;
        record.patch_bytes = patch_blob->bytes;
    }
    if (publish) {
        auto bytes = common::write_checkpoint(published_ ? *published_ : model_, info);
        if (!bytes) return bytes.error();
        auto blob = blobs_.put(*bytes);
        if (!blob) return blob.error();
        record.blob_sha256 = blob->sha256;
        record.blob_bytes = blob->bytes;
    }
    record.created_at = clock_();
    record.merged_results = static_cast<std::int64_t>(merged.size());
    auto optimizer = policy_->optimizer_state();
    if (!optimizer.empty()) {
        auto state_bytes = common::write_checkpoint(optimizer, {task_.record.id, task_.config.model, next});
        if (!state_bytes) return state_bytes.error();
        auto state_blob = blobs_.put(*state_bytes);
        if (!state_blob) return state_blob.error();
        record.optimizer_sha256 = state_blob->sha256;
    }
    if (auto status = store_.commit_version(record, merged); !status) return status;
    version_ = next;
    if (publish) {
        published_version_ = next;
        published_blob_ = {record.blob_sha256, record.blob_bytes};
        if (hooks_.model_committed) hooks_.model_committed(task_.record.id, next, published_ ? *published_ : model_);
    }
    for (const auto& id : merged) results_.remove(id);
    changed_since_idle_ = true;
    curve_->version_committed(next, false);
    return {};
}

}  // namespace tessera::server
