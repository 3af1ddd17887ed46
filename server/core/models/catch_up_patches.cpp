// Catch-up patches: per volunteer, the held reconstruction patched towards the published model.
#include "catch_up_patches.h"

#include <algorithm>

#include "checkpoint.h"
#include "model_patch.h"
#include "safetensors.h"

namespace tessera::server {

common::Result<std::optional<CatchUpPatches::Offer>> CatchUpPatches::offer(const std::string& task_id,
                                                                           const TaskConfig& config,
                                                                           const std::string& client_id,
                                                                           const std::string& held_sha256,
                                                                           const VersionRecord& base) {
    if (config.catch_up_states == 0 || !config.patches || held_sha256.empty() || held_sha256 == base.blob_sha256)
        return std::optional<Offer>();
    std::lock_guard lock(mutex_);
    sweep();
    Key key{task_id, client_id};
    auto held = held_model(key, held_sha256);
    if (!held) return held.error();
    if (!*held) return std::optional<Offer>();
    auto target_model = target(base);
    if (!target_model) return target_model.error();
    auto reconstruction = std::move(**held);
    auto patch = common::make_patch(**target_model, reconstruction, *config.patches);
    if (!patch) return common::with_context("a catch-up patch", patch.error());
    if (static_cast<std::int64_t>(patch->size()) >= base.blob_bytes) return std::optional<Offer>();
    auto bytes = common::write_checkpoint(reconstruction, {task_id, config.model, base.version});
    if (!bytes) return bytes.error();
    Offer offer;
    auto model = blobs_.put(*bytes);
    if (!model) return model.error();
    auto patch_blob = blobs_.put(*patch);
    if (!patch_blob) return patch_blob.error();
    offer.model = *model;
    offer.patch = *patch_blob;
    keep(key, offer, config.catch_up_states, config.deadline_s);
    return std::optional(offer);
}

common::Result<std::optional<common::NamedTensors>> CatchUpPatches::held_model(const Key& key,
                                                                               const std::string& sha256) {
    if (auto state = states_.find(key); state != states_.end() && state->second.model.sha256 == sha256) {
        auto bytes = blobs_.read(sha256, common::kMaxModelBytes);
        if (!bytes) return bytes.error();
        auto model = common::read_checkpoint(*bytes);
        if (!model) return common::with_context("the reconstruction held by " + key.client_id, model.error());
        return std::optional(std::move(*model));
    }
    auto published = store_.versions_of_blob(key.task_id, sha256);
    if (!published) return published.error();
    if (!*published) return std::optional<common::NamedTensors>();
    auto model = published_.model(key.task_id, (*published)->first);
    if (!model) return model.error();
    return std::optional(std::move(*model));
}

common::Result<const common::NamedTensors*> CatchUpPatches::target(const VersionRecord& base) {
    auto& cached = targets_[base.task_id];
    if (cached.first != base.blob_sha256) {
        auto model = published_.model(base.task_id, base.version);
        if (!model) return model.error();
        cached = {base.blob_sha256, std::move(*model)};
    }
    return &cached.second;
}

void CatchUpPatches::keep(const Key& key, const Offer& offer, std::int64_t max_states, std::int64_t grace_s) {
    if (auto found = states_.find(key); found != states_.end()) {
        retire(found->second, grace_s);
        lru_.erase(found->second.lru);
        states_.erase(found);
    }
    lru_.push_front(key);
    states_[key] = {offer.model, offer.patch, lru_.begin()};
    std::int64_t in_task = 0;
    for (const auto& [k, state] : states_) in_task += k.task_id == key.task_id ? 1 : 0;
    for (auto it = lru_.end(); in_task > max_states && it != lru_.begin();) {
        --it;
        if (it->task_id != key.task_id) continue;
        auto found = states_.find(*it);
        retire(found->second, grace_s);
        states_.erase(found);
        it = lru_.erase(it);
        --in_task;
    }
}

void CatchUpPatches::retire(const State& state, std::int64_t grace_s) {
    auto after = clock_() + grace_s;
    retired_.emplace_back(after, state.model.sha256);
    retired_.emplace_back(after, state.patch.sha256);
}

void CatchUpPatches::sweep() {
    auto now = clock_();
    // The store's blob list is read at most once a sweep interval, however many requests come.
    if (now < next_sweep_ ||
        std::none_of(retired_.begin(), retired_.end(), [&](const auto& entry) { return entry.first <= now; }))
        return;
    next_sweep_ = now + kSweepIntervalS;
    // A blob another state or a version's row still names is kept: two volunteers that held the
    // same model get the same bytes, and a lossless catch-up is the published model itself.
    auto referenced = store_.referenced_blobs();
    if (!referenced) return;  // tried again at the next sweep
    for (const auto& [key, state] : states_) referenced->insert({state.model.sha256, state.patch.sha256});
    std::erase_if(retired_, [&](const auto& entry) {
        if (entry.first > now) return false;
        if (!referenced->count(entry.second)) (void)blobs_.remove(entry.second);
        return true;
    });
}

}  // namespace tessera::server
