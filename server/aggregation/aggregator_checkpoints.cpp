// Aggregator: its checkpoints. Loading the last one and replaying the results merged since (at
// start, and after a failed commit), writing full checkpoints, and retention.
#include "aggregator.h"

#include <algorithm>

#include <boost/json.hpp>

#include "checkpoint.h"
#include "logger.h"
#include "model_cache.h"
#include "safetensors.h"
#include "sha256.h"
#include "tensor_math.h"

namespace tessera::server {

common::Result<Aggregator::CheckpointStart> Aggregator::read_checkpoint(const VersionRecord& start) {
    auto read_model = [&](const std::string& sha256) -> common::Result<common::NamedTensors> {
        auto bytes = blobs_.read(sha256, common::kMaxModelBytes);
        if (!bytes) return common::with_context("model version " + std::to_string(start.version), bytes.error());
        return common::read_checkpoint(*bytes);
    };
    CheckpointStart loaded;
    auto model = read_model(start.state_sha256.value_or(start.blob_sha256));
    if (!model) return model.error();
    loaded.published_version = start.version;
    if (task_.config.patches) {
        auto read = start.state_sha256 ? read_model(start.blob_sha256) : model;
        if (!read) return read.error();
        loaded.published = std::move(*read);
        auto versions = store_.versions_of_blob(task_.record.id, start.blob_sha256);
        if (!versions) return versions.error();
        if (*versions) loaded.published_version = (*versions)->first;
    }
    if (start.optimizer_sha256) {
        auto state_bytes = blobs_.read(*start.optimizer_sha256, common::kMaxModelBytes);
        if (!state_bytes) return state_bytes.error();
        auto state = common::read_checkpoint(*state_bytes);
        if (!state) return state.error();
        loaded.saved = split_saved_state(std::move(*state));
    }
    loaded.model = std::move(*model);
    return loaded;
}

common::Status Aggregator::load_committed(std::int64_t version) {
    const auto& task_id = task_.record.id;
    auto found = store_.last_checkpoint(task_id, version);
    if (!found) return found.error();
    if (!*found)
        return common::make_error("task '" + task_id + "' has no checkpoint at or before version " +
                                  std::to_string(version));
    const auto& start = **found;
    auto loaded = read_checkpoint(start);
    if (!loaded) return loaded.error();
    auto& saved = loaded->saved;
    // The guard's state first: a cut learning rate holds from the checkpoint on.
    auto guard = DivergenceGuard::from_tensors(saved.guard);
    if (!guard) return guard.error();
    auto settings = task_.config.merge;
    settings.server_lr *= guard->state().lr_scale;
    auto policy = make_merge_policy(settings);
    if (!policy) return policy.error();
    if (auto status = (*policy)->load_optimizer_state(saved.policy, loaded->model); !status) return status;
    // The EMA starts at the model where a checkpoint has none (version 0, or a task from before).
    ema_.reset();
    if (task_.config.ema_decay > 0) {
        if (!saved.ema.empty()) {
            if (auto layout = check_same_layout(loaded->model, saved.ema); !layout)
                return common::with_context("the checkpoint's EMA", layout.error());
            ema_ = std::move(saved.ema);
        } else {
            ema_ = loaded->model;
        }
    }
    model_ = std::move(loaded->model);
    published_ = std::move(loaded->published);
    published_version_ = loaded->published_version;
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
            auto added = policy_->add(
                model_, {id, version_ - (*found)->base_version, std::move(*delta), (*found)->concurrency.value_or(1)});
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

common::Status Aggregator::restore_committed() {
    auto task = store_.task(task_.record.id);
    if (!task) return task.error();
    if (!*task) return common::make_error("task '" + task_.record.id + "' is gone");
    if (auto status = load_committed((*task)->version); !status) return status;
    auto pending = store_.accepted_after(task_.record.id, 0);
    if (!pending) return pending.error();
    std::lock_guard lock(mutex_);
    queue_.clear();
    for (auto& a : *pending) {
        accepted_through_ = std::max(accepted_through_.load(), a.seq);
        queue_.push_back(std::move(a));
    }
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
