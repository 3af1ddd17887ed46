// Catch-up patches (issue 54; docs/tensor_format.md, "Catch-up patches"): one patch per unit,
// from the model a volunteer holds straight to the unit's published model, however many
// versions it missed. The patch is made in the task's patch encoding (low-bit, top-k when
// set), so the volunteer's model θ̃ + decode(patch) is not the published one: that model, its
// reconstruction, is written as a blob here and named by the unit as its model, and the next
// patch for that volunteer starts from it, so whatever a patch left out is sent by the next
// (error feedback per volunteer, EF21). State per task: at most `catch_up_states` volunteers'
// reconstructions (model files on disk, none in memory); the least recently served is dropped
// first, and a dropped or replaced one's files outlive it by the task's deadline, so that a unit
// already sent can still be downloaded and its result checked against its base. A volunteer without state (new, dropped, or after a restart, which
// removes the files as orphans) gets today's path: the published chain or the model whole.
// Thread-safe; one patch is made at a time.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "blob_store.h"
#include "clock.h"
#include "delta_codec.h"
#include "published_models.h"
#include "store.h"
#include "task_config.h"

namespace tessera::server {

class CatchUpPatches {
public:
    // `store` gives the published versions and which blobs its rows name (never removed here).
    CatchUpPatches(Store& store, PublishedModels& published, BlobStore& blobs, Clock clock)
        : store_(store), published_(published), blobs_(blobs), clock_(std::move(clock)) {}

    struct Offer {
        common::BlobRef model;  // the reconstruction the unit names as its model
        common::BlobRef patch;  // from the held model to it
    };
    // The catch-up for volunteer `client_id` holding the model `held_sha256` (a reconstruction
    // made for it, or a published model of the task) to the published model of `base`; none
    // when the task has catch-up off, the held model is unknown, or the patch is not smaller
    // than the model.
    common::Result<std::optional<Offer>> offer(const std::string& task_id, const TaskConfig& config,
                                               const std::string& client_id, const std::string& held_sha256,
                                               const VersionRecord& base);

private:
    struct Key {
        std::string task_id, client_id;
        auto operator<=>(const Key&) const = default;
    };
    struct State {
        common::BlobRef model, patch;
        std::list<Key>::iterator lru;
    };
    // The held model's tensors: a reconstruction this volunteer was sent, or a published model.
    common::Result<std::optional<common::NamedTensors>> held_model(const Key& key, const std::string& sha256);
    // The published model of `base`, kept for the next request on the same version.
    common::Result<const common::NamedTensors*> target(const VersionRecord& base);
    void keep(const Key& key, const Offer& offer, std::int64_t max_states, std::int64_t grace_s);
    // Files of states replaced or dropped: removed once no unit sent can still need them.
    void retire(const State& state, std::int64_t grace_s);
    void sweep();

    Store& store_;
    PublishedModels& published_;
    BlobStore& blobs_;
    Clock clock_;
    std::mutex mutex_;
    std::map<Key, State> states_;
    std::list<Key> lru_;                                                           // most recently served first
    std::map<std::string, std::pair<std::string, common::NamedTensors>> targets_;  // task → (sha256, model)
    std::vector<std::pair<std::int64_t, std::string>> retired_;                    // (remove after, sha256)
    std::int64_t next_sweep_ = 0;
    static constexpr std::int64_t kSweepIntervalS = 60;
};

}  // namespace tessera::server
