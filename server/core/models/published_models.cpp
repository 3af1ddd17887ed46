// PublishedModels: a published model from an earlier one and the patches after it.
#include "published_models.h"

#include "checkpoint.h"
#include "model_patch.h"
#include "safetensors.h"
#include "sha256.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

common::Result<common::NamedTensors> read_model(const BlobStore& blobs, const std::string& sha256) {
    auto bytes = blobs.read(sha256, common::kMaxModelBytes);
    if (!bytes) return bytes.error();
    return common::read_checkpoint(*bytes);
}

}  // namespace

common::Result<std::int64_t> PublishedModels::first_publishing(const VersionRecord& version) {
    auto published = versions_.versions_of_blob(version.task_id, version.blob_sha256);
    if (!published) return published.error();
    return *published ? (*published)->first : version.version;
}

common::Result<common::NamedTensors> PublishedModels::model(const std::string& task_id, std::int64_t version,
                                                            std::optional<Start> start) {
    auto record = versions_.version(task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("task '" + task_id + "' has no version " + std::to_string(version));
    if (blobs_.has((*record)->blob_sha256)) return read_model(blobs_, (*record)->blob_sha256);
    auto first = first_publishing(**record);
    if (!first) return first.error();
    return build(**record, *first, start);
}

common::Result<common::NamedTensors> PublishedModels::build(const VersionRecord& version, std::int64_t first,
                                                            std::optional<Start> start) {
    const auto& task_id = version.task_id;
    common::NamedTensors model;
    std::string previous;
    std::int64_t from = 0;
    if (start && start->version <= first) {
        auto from_record = versions_.version(task_id, start->version);
        if (!from_record) return from_record.error();
        if (!*from_record) return common::make_error("no version " + std::to_string(start->version));
        model = *start->model;
        previous = (*from_record)->blob_sha256;
        from = start->version;
    } else {  // the newest checkpoint before it whose published model retention has kept
        for (auto at = first;;) {
            auto checkpoint = versions_.last_checkpoint(task_id, at);
            if (!checkpoint) return checkpoint.error();
            if (!*checkpoint)
                return common::make_error("no stored checkpoint precedes version " + std::to_string(version.version) +
                                          " (retention removed them)");
            if (blobs_.has((*checkpoint)->blob_sha256)) {
                auto read = read_model(blobs_, (*checkpoint)->blob_sha256);
                if (!read) return read.error();
                model = std::move(*read);
                previous = (*checkpoint)->blob_sha256;
                from = (*checkpoint)->version;
                break;
            }
            at = (*checkpoint)->version - 1;
        }
    }
    auto chain = versions_.versions_between(task_id, from, first);
    if (!chain) return chain.error();
    for (const auto& v : *chain) {
        if (v.blob_sha256 == previous) continue;  // not published at v
        auto context = "the patch of version " + std::to_string(v.version);
        if (!v.patch_sha256) return common::make_error(context + " is missing");
        auto patch = blobs_.read(*v.patch_sha256, common::kMaxModelBytes);
        if (!patch) return common::with_context(context, patch.error());
        if (common::sha256_hex(*patch) != *v.patch_sha256) return common::make_error(context + " is damaged");
        if (auto status = common::apply_patch(model, *patch); !status)
            return common::with_context(context, status.error());
        previous = v.blob_sha256;
    }
    return model;
}

common::Status PublishedModels::ensure(const std::string& task_id, std::int64_t version) {
    auto record = versions_.version(task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("task '" + task_id + "' has no version " + std::to_string(version));
    return ensure(**record);
}

common::Status PublishedModels::ensure(const VersionRecord& record) {
    if (blobs_.has(record.blob_sha256)) return {};
    auto task = load_task(tasks_, record.task_id);
    if (!task) return task.error();
    auto first = first_publishing(record);
    if (!first) return first.error();
    return ensure(record, *first, task->config.model);
}

common::Status PublishedModels::ensure(const VersionRecord& record, std::int64_t first_publishing,
                                       const std::string& model_name) {
    if (blobs_.has(record.blob_sha256)) return {};
    std::lock_guard lock(mutex_);
    if (blobs_.has(record.blob_sha256)) return {};  // written while this one waited
    auto written = write(record, first_publishing, model_name);
    if (!written)
        return common::with_context("the published model of version " + std::to_string(record.version),
                                    written.error());
    return {};
}

common::Result<bool> PublishedModels::ensure_blob(const std::string& sha256) {
    if (blobs_.has(sha256)) return true;
    auto owner = versions_.version_publishing(sha256);
    if (!owner) return owner.error();
    if (!*owner) return false;
    auto kept = versions_.last_checkpoint((*owner)->first, (*owner)->second);
    if (!kept) return kept.error();
    if (!*kept) return false;  // retention removed what it was built from
    if (auto status = ensure((*owner)->first, (*owner)->second); !status) return status.error();
    return true;
}

common::Result<std::optional<common::NamedTensors>> PublishedModels::reconstruction(const std::string& task_id,
                                                                                    std::int64_t version,
                                                                                    const std::string& sha256) {
    auto record = versions_.version(task_id, version);
    if (!record) return record.error();
    if (!*record || (*record)->blob_sha256 == sha256 || !blobs_.has(sha256))
        return std::optional<common::NamedTensors>();
    auto model = read_model(blobs_, sha256);
    if (!model) return common::with_context("the reconstruction " + common::short_hash(sha256), model.error());
    return std::optional(std::move(*model));
}

common::Status PublishedModels::write(const VersionRecord& version, std::int64_t first, const std::string& model_name) {
    auto built = build(version, first, std::nullopt);
    if (!built) return built.error();
    auto bytes = common::write_checkpoint(*built, {version.task_id, model_name, first});
    if (!bytes) return bytes.error();
    if (common::sha256_hex(*bytes) != version.blob_sha256)
        return common::make_error("rebuilt from the patches, it does not match its SHA-256");
    auto stored = blobs_.put(*bytes);
    if (!stored) return stored.error();
    return {};
}

}  // namespace tessera::server
