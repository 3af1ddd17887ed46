// The store's model versions of a task: checkpoints, patches, retention and commits
// (store_versions.cpp). One part of Store (store.h): a component given only this part sees only
// these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

class VersionStore : protected virtual StoreCore {
public:
    common::Result<std::optional<VersionRecord>> version(const std::string& task_id, std::int64_t version);
    common::Result<std::vector<VersionRecord>> versions(const std::string& task_id);
    // Versions `after` + 1 … `through`, in order (a patch chain).
    common::Result<std::vector<VersionRecord>> versions_between(const std::string& task_id, std::int64_t after,
                                                                std::int64_t through);
    // The versions after the last one whose published model is the blob `held_sha256`, through
    // `through`, in order (the patch chain from a model a volunteer holds); none when no version
    // published that blob or its last version is not before `through`.
    common::Result<std::vector<VersionRecord>> versions_after_blob(const std::string& task_id,
                                                                   const std::string& held_sha256,
                                                                   std::int64_t through);
    // The first and last versions whose published model is the blob `sha256` (with a publishing
    // cadence, the versions between two publications share the earlier one's model).
    struct BlobVersions {
        std::int64_t first = 0;
        std::int64_t last = 0;
    };
    common::Result<std::optional<BlobVersions>> versions_of_blob(const std::string& task_id, const std::string& sha256);
    // The task and first version whose published model is the blob `sha256`, if any.
    common::Result<std::optional<std::pair<std::string, std::int64_t>>> version_publishing(const std::string& sha256);
    // The newest version at or before `at_most` that is a checkpoint (a restart point).
    common::Result<std::optional<VersionRecord>> last_checkpoint(const std::string& task_id, std::int64_t at_most);
    // Results merged into versions `after` + 1 … `through`, in merge order (the true model's log).
    struct MergedResult {
        std::string assignment_id;
        std::int64_t merged_version = 0;
    };
    common::Result<std::vector<MergedResult>> merged_between(const std::string& task_id, std::int64_t after,
                                                             std::int64_t through);
    // Makes an existing version a checkpoint once its files are written (at shutdown).
    common::Status set_checkpoint(const std::string& task_id, std::int64_t version,
                                  const std::optional<std::string>& state_sha256,
                                  const std::optional<std::string>& optimizer_sha256);
    // Retention: versions before the newest `keep` checkpoints (and before the newest
    // checkpoint at or before any live unit's base) lose their files, except pinned ones; they
    // stay in the history as rows. Returns the files no version still needs, to be deleted.
    struct Retired {
        std::int64_t before = 0;  // the first version kept whole
        std::vector<std::string> files;
    };
    common::Result<Retired> retire_versions(const std::string& task_id, std::int64_t keep);
    // Pins or unpins a checkpoint; false when the version is not a checkpoint.
    common::Result<bool> set_pinned(const std::string& task_id, std::int64_t version, bool pinned);
    // Records a new version, moves the task to it and marks `merged` assignments merged. With
    // a `fence`, only while that lease is still the caller's (a deposed aggregator commits nothing).
    common::Status commit_version(const VersionRecord& version, const std::vector<std::string>& merged,
                                  const std::optional<LeaseClaim>& fence = std::nullopt);
    common::Status set_validation_result(const std::string& task_id, std::int64_t version,
                                         const ValidationResult& result);

protected:
    VersionStore() = default;
};

}  // namespace tessera::server
