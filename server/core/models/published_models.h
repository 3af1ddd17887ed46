// Published models on demand. With downlink patches, a version between checkpoints is stored
// as its patch only (schemas/db.sql, model_versions.checkpoint). Its published model is built
// in memory when the server needs it (the validator, from a recent model it holds and a patch
// or two), and written as a file only when a volunteer must download it whole (one that holds
// no model to patch, or a blob request): rebuilt as a volunteer would, and checked against the
// version's SHA-256. Thread-safe; one file written at a time.
#pragma once

#include <mutex>
#include <optional>
#include <string>

#include "blob_store.h"
#include "delta_codec.h"
#include "store.h"

namespace tessera::server {

class PublishedModels {
public:
    // The tasks' configurations and the versions' records; the files in `blobs`.
    PublishedModels(TaskStore& tasks, VersionStore& versions, BlobStore& blobs)
        : tasks_(tasks), versions_(versions), blobs_(blobs) {}

    // A published model to build from: the model of version `version`.
    struct Start {
        std::int64_t version = 0;
        const common::NamedTensors* model = nullptr;
    };
    // The published model of `version`, read or built in memory: from `start` when given (at or
    // before the version), else from the newest stored one before it, plus the patches since
    // (each checked against its hash).
    common::Result<common::NamedTensors> model(const std::string& task_id, std::int64_t version,
                                               std::optional<Start> start = std::nullopt);
    // The published model of `version` is in the blob store afterwards.
    common::Status ensure(const std::string& task_id, std::int64_t version);
    // The same for a version whose record the caller has read.
    common::Status ensure(const VersionRecord& record);
    // The same when the caller knows too the first version publishing its model (whose number
    // the file's header carries) and the task's model name: no read of the store but the
    // patch chain's, and only when the file is missing.
    common::Status ensure(const VersionRecord& record, std::int64_t first_publishing, const std::string& model_name);
    // The same for a blob named by its hash: false when no version publishes it or retention
    // has removed what it would be built from.
    common::Result<bool> ensure_blob(const std::string& sha256);

    // The model a unit names when it is not its base version's published one (a catch-up
    // reconstruction, catch_up_patches.h), read from the blob store; none when it is the
    // published one, or when its file is gone (retired: the caller falls back on the published).
    common::Result<std::optional<common::NamedTensors>> reconstruction(const std::string& task_id, std::int64_t version,
                                                                       const std::string& sha256);

private:
    // The version whose checkpoint header the model's bytes carry: the first to publish it.
    common::Result<std::int64_t> first_publishing(const VersionRecord& version);
    // The model `version` publishes (first published at `first`), built as in model().
    common::Result<common::NamedTensors> build(const VersionRecord& version, std::int64_t first,
                                               std::optional<Start> start);
    common::Status write(const VersionRecord& version, std::int64_t first, const std::string& model_name);

    TaskStore& tasks_;
    VersionStore& versions_;
    BlobStore& blobs_;
    std::mutex mutex_;
};

}  // namespace tessera::server
