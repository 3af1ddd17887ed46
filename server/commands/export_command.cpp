// `tessera-server export`: a model version's checkpoint, checked against its hash, as a
// safetensors file: the model, and where the task keeps one the EMA of its versions beside it
// (tensors named "ema/" + the model's names), or either alone under the model's names.
#include <cxxopts.hpp>

#include "blob_store.h"
#include "checkpoint.h"
#include "command_line.h"
#include "command_support.h"
#include "file_io.h"
#include "model_ema.h"
#include "safetensors.h"
#include "sha256.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

// The EMA saved with a checkpoint's policy state; empty when it has none.
common::Result<common::NamedTensors> ema_of(BlobStore& blobs, const VersionRecord& version) {
    if (!version.optimizer_sha256) return common::NamedTensors{};
    auto bytes = blobs.read(*version.optimizer_sha256, common::kMaxModelBytes);
    if (!bytes) return common::with_context("the policy state of version " + std::to_string(version.version), bytes.error());
    auto state = common::read_checkpoint(*bytes);
    if (!state) return state.error();
    return split_saved_state(std::move(*state)).ema;
}

// The task named by --task, else the newest one.
common::Result<TaskRecord> task_to_export(Store& store, const cxxopts::ParseResult& args) {
    std::optional<TaskRecord> task;
    if (args.count("task")) {
        auto found = store.task(args["task"].as<std::string>());
        if (!found) return found.error();
        task = *found;
    } else {
        auto tasks = store.tasks();
        if (!tasks) return tasks.error();
        if (!tasks->empty()) task = tasks->back();
    }
    if (!task) return common::make_error("no such task");
    return *task;
}

// The version named by --version, else the newest checkpoint. The true model is on disk at
// checkpoints only (every version without downlink patches; with them every --checkpoint-every
// versions and at the server's stop).
common::Result<VersionRecord> version_to_export(Store& store, const TaskRecord& task,
                                                const cxxopts::ParseResult& args) {
    auto version = args.count("version") ? store.version(task.id, args["version"].as<std::int64_t>())
                                         : store.last_checkpoint(task.id, task.version);
    if (!version) return version.error();
    if (!*version) return common::make_error("task " + task.id + " has no such version");
    if (!(*version)->checkpoint) {
        auto newest = store.last_checkpoint(task.id, task.version);
        return common::make_error("version " + std::to_string((*version)->version) +
                                  " is not a checkpoint (its true model is rebuilt only by the running server); "
                                  "the newest checkpoint is version " +
                                  (newest && *newest ? std::to_string((*newest)->version) : std::string("?")));
    }
    return **version;
}

// The file to write: the true model (not the published one the downlink patches approach),
// checked against its hash, with or as its EMA as `weights` asks. `has_ema`: whether it holds one.
common::Result<common::Bytes> exported_file(BlobStore& blobs, const std::string& task_id, const VersionRecord& version,
                                            const std::string& weights, bool& has_ema) {
    auto sha256 = version.state_sha256.value_or(version.blob_sha256);
    auto bytes = blobs.read(sha256, common::kMaxModelBytes);
    if (!bytes) return bytes.error();
    if (common::sha256_hex(*bytes) != sha256)
        return common::make_error("the stored checkpoint of version " + std::to_string(version.version) +
                                  " is damaged");
    auto ema = ema_of(blobs, version);
    if (!ema) return ema.error();
    has_ema = !ema->empty();
    if (weights == "ema" && !has_ema)
        return common::make_error("task " + task_id + " keeps no EMA (its --ema-decay is 0, or it predates EMAs)");
    if (weights == "model" || !has_ema) return bytes;
    auto model = common::read_checkpoint(*bytes);
    if (!model) return model.error();
    auto stored = common::parse_safetensors(*bytes);
    if (!stored) return stored.error();
    auto preset = stored->metadata().find("model");
    auto tensors = weights == "ema" ? std::move(*ema) : with_ema(std::move(*model), *ema);
    return common::write_checkpoint(
        tensors, {task_id, preset == stored->metadata().end() ? std::string() : preset->second, version.version});
}

}  // namespace

int export_command(int argc, char** argv) {
    cxxopts::Options options("tessera-server export", "Write a model version as safetensors");
    options.add_options()("state", "state directory", cxxopts::value<std::string>())(
        "task", "task id (default: the current task)", cxxopts::value<std::string>())(
        "version", "model version, a checkpoint (default: the newest checkpoint)", cxxopts::value<std::int64_t>())(
        "out", "output file", cxxopts::value<std::string>())(
        "weights", "model, ema, or both (the EMA's tensors prefixed ema/; the model alone without an EMA)",
        cxxopts::value<std::string>()->default_value("both"));
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("state") || !args.count("out")) return fail("export", "needs --state DIR and --out FILE");
    auto weights = args["weights"].as<std::string>();
    if (weights != "model" && weights != "ema" && weights != "both")
        return fail("export", "--weights must be model, ema or both");
    StateDir state = state_dir_of(args);
    auto store = Store::connect(state.database_url(), false);
    if (!store) return fail("export", store.message());
    auto task = task_to_export(**store, args);
    if (!task) return fail("export", task.message());
    auto version = version_to_export(**store, *task, args);
    if (!version) return fail("export", version.message());
    // An exported version is pinned: retention keeps its files (docs/operations.md).
    auto pinned = (*store)->set_pinned(task->id, version->version, true);
    if (!pinned) return fail("export", pinned.message());
    BlobStore blobs(state.blobs());
    bool has_ema = false;
    auto bytes = exported_file(blobs, task->id, *version, weights, has_ema);
    if (!bytes) return fail("export", bytes.message());
    if (auto status = common::write_file_atomic(args["out"].as<std::string>(), *bytes); !status)
        return fail("export", status.message());
    std::cout << "exported " << task->id << " version " << version->version << " ("
              << (!has_ema || weights == "model" ? "model"
                  : weights == "ema"             ? "EMA"
                                                 : "model and EMA")
              << ") to " << args["out"].as<std::string>() << " (pinned: retention keeps it)\n";
    return 0;
}

}  // namespace tessera::server
