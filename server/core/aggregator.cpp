// Aggregator: merge loop, checkpoint-then-commit, evaluation scheduling.
#include "aggregator.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include <boost/json.hpp>

#include "checkpoint.h"
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

common::Status Aggregator::load_committed(std::int64_t version) {
    const auto& task_id = task_.record.id;
    auto found = store_.last_checkpoint(task_id, version);
    if (!found) return found.error();
    if (!*found)
        return common::make_error("task '" + task_id + "' has no checkpoint at or before version " +
                                  std::to_string(version));
    const auto& start = **found;
    auto read_model = [&](const std::string& sha256) -> common::Result<common::NamedTensors> {
        auto bytes = blobs_.read(sha256, common::kMaxModelBytes);
        if (!bytes) return common::with_context("model version " + std::to_string(start.version), bytes.error());
        return common::read_checkpoint(*bytes);
    };
    auto model = read_model(start.state_sha256.value_or(start.blob_sha256));
    if (!model) return model.error();
    std::optional<common::NamedTensors> published;
    std::int64_t published_version = start.version;
    if (task_.config.patches) {
        auto read = start.state_sha256 ? read_model(start.blob_sha256) : model;
        if (!read) return read.error();
        published = std::move(*read);
        auto versions = store_.versions_of_blob(task_id, start.blob_sha256);
        if (!versions) return versions.error();
        if (*versions) published_version = (*versions)->first;
    }
    SavedState saved;
    if (start.optimizer_sha256) {
        auto state_bytes = blobs_.read(*start.optimizer_sha256, common::kMaxModelBytes);
        if (!state_bytes) return state_bytes.error();
        auto state = common::read_checkpoint(*state_bytes);
        if (!state) return state.error();
        saved = split_saved_state(std::move(*state));
    }
    // The guard's state first: a cut learning rate holds from the checkpoint on.
    auto guard = DivergenceGuard::from_tensors(saved.guard);
    if (!guard) return guard.error();
    auto settings = task_.config.merge;
    settings.server_lr *= guard->state().lr_scale;
    auto policy = make_merge_policy(settings);
    if (!policy) return policy.error();
    if (auto status = (*policy)->load_optimizer_state(saved.policy, *model); !status) return status;
    // The EMA starts at the model where a checkpoint has none (version 0, or a task from before).
    ema_.reset();
    if (task_.config.ema_decay > 0) {
        if (!saved.ema.empty()) {
            if (auto layout = check_same_layout(*model, saved.ema); !layout)
                return common::with_context("the checkpoint's EMA", layout.error());
            ema_ = std::move(saved.ema);
        } else {
            ema_ = *model;
        }
    }
    model_ = std::move(*model);
    published_ = std::move(published);
    published_version_ = published_version;
    published_blob_ = {start.blob_sha256, start.blob_bytes};
    policy_ = std::move(*policy);
    guard_ = std::move(*guard);
    best_model_.reset();
    best_model_loss_ = 0;
    best_model_version_ = -1;
    version_ = start.version;
    since_checkpoint_.clear();  // their files are the log replayed below: not to be removed
    checkpointed(start.version, clock_());
    if (start.version < version)
        if (auto status = replay(start.version, version); !status)
            return common::with_context("replaying versions " + std::to_string(start.version + 1) + " to " +
                                            std::to_string(version) + " from the checkpoint of version " +
                                            std::to_string(start.version),
                                        status.error());
    if (hooks_.model_committed) hooks_.model_committed(task_id, version_, published_ ? *published_ : model_);
    return {};
}

common::Status Aggregator::replay(std::int64_t after, std::int64_t through) {
    const auto& task_id = task_.record.id;
    auto merged = store_.merged_between(task_id, after, through);
    if (!merged) return merged.error();
    auto versions = store_.versions_between(task_id, after, through);
    if (!versions) return versions.error();
    std::size_t next = 0;
    for (const auto& v : *versions) {
        version_ = v.version - 1;
        std::vector<std::string> ids;
        for (; next < merged->size() && (*merged)[next].merged_version == v.version; ++next)
            ids.push_back((*merged)[next].assignment_id);
        std::optional<MergeOutcome> outcome;
        for (const auto& id : ids) {
            auto found = store_.assignment(id);
            if (!found) return found.error();
            if (!*found) return common::make_error("result " + id + " is gone");
            auto delta = results_.read(id, value_count(model_) + 1);
            if (!delta)
                return common::with_context("result " + id + " of version " + std::to_string(v.version), delta.error());
            auto added = policy_->add(model_, {id, version_ - (*found)->base_version, std::move(*delta),
                                               (*found)->concurrency.value_or(1)});
            if (!added) return added.error();
            outcome = std::move(*added);
        }
        auto sorted = [](std::vector<std::string> list) {
            std::sort(list.begin(), list.end());
            return list;
        };
        if (!outcome || !outcome->model_changed || sorted(outcome->merged_ids) != sorted(ids))
            return common::make_error("merging the results of version " + std::to_string(v.version) +
                                      " again does not give that version");
        if (auto status = update_ema(v.version); !status) return status;
        since_checkpoint_.insert(since_checkpoint_.end(), ids.begin(), ids.end());
    }
    version_ = through;
    if (published_ && !versions->empty()) {  // what the volunteers were sent: from the stored patches
        const auto& last = versions->back();
        auto model = published_models_.model(task_id, through, PublishedModels::Start{after, &*published_});
        if (!model) return model.error();
        auto first = store_.versions_of_blob(task_id, last.blob_sha256);
        if (!first) return first.error();
        published_ = std::move(*model);
        published_version_ = *first ? (*first)->first : through;
        published_blob_ = {last.blob_sha256, last.blob_bytes};
        auto bytes = common::write_checkpoint(*published_, {task_id, task_.config.model, published_version_});
        if (!bytes) return bytes.error();
        if (common::sha256_hex(*bytes) != published_blob_.sha256)
            return common::make_error("the stored patches do not give the published model of version " +
                                      std::to_string(published_version_));
    }
    return {};
}

common::Status Aggregator::update_ema(std::int64_t version) {
    if (!ema_) return {};
    return ema_update(*ema_, model_, ema_decay_at(task_.config.ema_decay, version));
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
        std::optional<std::string> id;
        std::deque<Evaluation> evaluations;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_ || !queue_.empty() || !evaluations_.empty(); });
            if (stopping_) return;
            evaluations.swap(evaluations_);
            if (!queue_.empty()) {
                id = queue_.front();
                queue_.pop_front();
            }
            busy_ = true;
        }
        // The guard first: a return it makes comes before the next merge.
        for (const auto& evaluation : evaluations) common::run_guarded("aggregator", [&] { judge(evaluation); });
        if (id) {
            auto started = std::chrono::steady_clock::now();
            auto merged = merge_guarded(*id);
            if (!merged)
                common::process_log().error("merge", "aggregator: " + *id + ": " + merged.message(),
                                            {{"assignment_id", *id}});
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

common::Status Aggregator::merge_guarded(const std::string& assignment_id) {
    common::Status merged;
    if (common::run_guarded("aggregator", [&] { merged = merge_one(assignment_id); })) return merged;
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

common::Status Aggregator::merge_one(const std::string& assignment_id) {
    auto found = store_.assignment(assignment_id);
    if (!found) return found.error();
    if (!*found || (*found)->state != AssignmentState::Accepted || (*found)->task_id != task_.record.id) return {};
    for (const auto& pending : policy_->pending_ids())
        if (pending == assignment_id) return {};  // replayed twice
    auto delta = results_.read(assignment_id, value_count(model_) + 1);
    if (!delta) return delta.error();
    // The concurrency stamped at acceptance, so that a replay merges as the first time did.
    IncomingDelta incoming{assignment_id, version_ - (*found)->base_version, std::move(*delta),
                           (*found)->concurrency.value_or(1)};
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

void Aggregator::judge(const Evaluation& evaluation) {
    auto verdict = guard_.observe(evaluation.version, evaluation.loss);
    // The return point: the best model evaluated since start that is not itself a strike (after
    // a restart the best one ever is in no memory).
    const double loss = evaluation.loss;
    if (verdict.action == GuardAction::None && evaluation.version >= guard_.state().from_version &&
        std::isfinite(loss) && loss <= DivergenceGuard::kFactor * guard_.state().best_loss &&
        (!best_model_ || loss < best_model_loss_)) {
        best_model_ = evaluation.model;
        best_model_loss_ = loss;
        best_model_version_ = evaluation.version;
    }
    if (verdict.action == GuardAction::None) return;
    if (auto status = act_on(verdict); !status)
        common::process_log().error("divergence", "aggregator: acting on a divergence of task " + task_.record.id +
                                                      ": " + status.message(),
                                    {{"task_id", task_.record.id}});
}

// Back to the best evaluated model as a new version, the policy afresh at the cut rate (or, past
// the recoveries, at the rate it has) with its buffered results queued again; a Pause also pauses
// the task. Without a best model to return to (none evaluated since start) it pauses the task.
common::Status Aggregator::act_on(const GuardVerdict& verdict) {
    const auto& task_id = task_.record.id;
    const bool can_return = best_model_ != nullptr;
    const GuardAction action = can_return ? verdict.action : GuardAction::Pause;
    const double lr_before = task_.config.merge.server_lr * guard_.state().lr_scale;
    const std::int64_t diverged_at = version_;
    if (can_return) {
        DivergenceGuard next = guard_;
        next.returned(version_ + 1, action);
        auto settings = task_.config.merge;
        settings.server_lr *= next.state().lr_scale;
        auto policy = make_merge_policy(settings);
        if (!policy) return policy.error();
        auto buffered = policy_->pending_ids();
        model_ = *best_model_;
        policy_ = std::move(*policy);
        guard_ = std::move(next);
        if (ema_) ema_ = model_;  // the EMA took in the diverged versions too
        if (auto committed = commit({}, true); !committed) {
            retry_pending_ = true;
            if (hooks_.commit_failed) hooks_.commit_failed();
            if (auto restored = restore_committed(); !restored)
                return common::make_error(committed.message() +
                                          "; restoring the committed version failed too: " + restored.message());
            return common::make_error("returning to version " + std::to_string(best_model_version_) + ": " +
                                      committed.message() + " (back at version " + std::to_string(version_) + ")");
        }
        std::lock_guard lock(mutex_);
        queue_.insert(queue_.begin(), buffered.begin(), buffered.end());
    } else {
        guard_.returned(version_ + 1, action);
    }
    if (action == GuardAction::Pause)
        if (auto status = store_.set_task_state(task_id, TaskState::Paused, clock_()); !status) return status;

    const double lr_now = task_.config.merge.server_lr * guard_.state().lr_scale;
    std::string what = "task " + task_id + " diverged at version " + std::to_string(diverged_at) + " (evaluation of version " +
                       std::to_string(verdict.version) + ": " + verdict.reason + "); ";
    if (can_return)
        what += "returned to the model of version " + std::to_string(best_model_version_) + " (loss " +
                std::to_string(best_model_loss_) + ") as version " +
                std::to_string(version_) + ", ";
    if (action == GuardAction::Recover)
        what += "server learning rate " + std::to_string(lr_before) + " -> " + std::to_string(lr_now) + " (recovery " +
                std::to_string(guard_.state().recoveries) + " of " + std::to_string(DivergenceGuard::kMaxRecoveries) +
                ")";
    else
        what += "task paused for the operator (" +
                std::string(can_return ? "recoveries used up" : "no evaluated model to return to since start") +
                "; `tessera-server task resume` merges and issues again)";
    common::process_log().error("divergence", what, {{"task_id", task_id}});
    boost::json::object detail{{"task_id", task_id},
                               {"action", action == GuardAction::Recover ? "recovered" : "paused"},
                               {"diverged_version", diverged_at},
                               {"evaluated_version", verdict.version},
                               {"loss", std::isfinite(verdict.loss) ? boost::json::value(verdict.loss) : nullptr},
                               {"best_loss", std::isfinite(verdict.best_loss) ? boost::json::value(verdict.best_loss)
                                                                              : nullptr},
                               {"best_version", verdict.best_version},
                               {"returned_to", can_return ? boost::json::value(best_model_version_) : nullptr},
                               {"version", version_.load()},
                               {"server_lr", lr_now},
                               {"recoveries", guard_.state().recoveries},
                               {"max_recoveries", DivergenceGuard::kMaxRecoveries},
                               {"at", clock_()},
                               {"message", what}};
    const auto json = boost::json::serialize(detail);
    if (auto status = store_.set_setting(divergence_setting_key(task_id), json); !status) return status;
    return store_.add_event(action == GuardAction::Recover ? "divergence_recovered" : "divergence_paused", json,
                            clock_());
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

common::Result<Aggregator::CheckpointFiles> Aggregator::write_checkpoint_files(
    std::int64_t version, const common::BlobRef& published_blob, std::int64_t published_version,
    const std::optional<common::NamedTensors>& ema) {
    auto put = [&](const common::NamedTensors& tensors, std::int64_t at) -> common::Result<common::BlobRef> {
        auto bytes = common::write_checkpoint(tensors, {task_.record.id, task_.config.model, at});
        if (!bytes) return bytes.error();
        return blobs_.put(*bytes);
    };
    CheckpointFiles files;
    if (published_) {
        if (!blobs_.has(published_blob.sha256))
            if (auto stored = put(*published_, published_version); !stored) return stored.error();
        auto state = put(model_, version);
        if (!state) return state.error();
        files.state_sha256 = state->sha256;
    }
    auto optimizer = policy_->optimizer_state();
    if (ema) optimizer = with_ema(std::move(optimizer), *ema);
    for (auto& t : guard_.to_tensors()) optimizer.push_back(std::move(t));
    if (!optimizer.empty()) {
        auto stored = put(optimizer, version);
        if (!stored) return stored.error();
        files.optimizer_sha256 = stored->sha256;
    }
    return files;
}

common::Status Aggregator::checkpoint_current() {
    auto files = write_checkpoint_files(version_, published_blob_, published_version_, ema_);
    if (!files) return files.error();
    if (auto status = store_.set_checkpoint(task_.record.id, version_, files->state_sha256, files->optimizer_sha256);
        !status)
        return status;
    checkpointed(version_, clock_());
    return {};
}

void Aggregator::checkpointed(std::int64_t version, std::int64_t at) {
    for (const auto& id : since_checkpoint_) results_.remove(id);
    since_checkpoint_.clear();
    checkpoint_version_ = version;
    checkpoint_at_ = at;
    if (auto status = retain(); !status)
        common::process_log().error("retention", "aggregator: retention: " + status.message());
}

// The rows first, then the files: a crash between leaves files no row needs, which the next
// start removes; never a row that names a deleted file as its checkpoint.
common::Status Aggregator::retain() {
    if (hooks_.keep_checkpoints <= 0) return {};
    auto retired = store_.retire_versions(task_.record.id, hooks_.keep_checkpoints);
    if (!retired) return retired.error();
    if (retired->files.empty()) return {};
    for (const auto& sha256 : retired->files)
        if (auto status = blobs_.remove(sha256); !status) return status;
    boost::json::object event{{"task_id", task_.record.id},
                              {"before", retired->before},
                              {"files", static_cast<std::int64_t>(retired->files.size())}};
    return store_.add_event("versions_retired", boost::json::serialize(event), clock_());
}

}  // namespace tessera::server
