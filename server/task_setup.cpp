// State directory and task creation.
#include "task_setup.h"

#include <boost/json.hpp>
#include <openssl/rand.h>

#include <sys/stat.h>

#include "blob_store.h"
#include "checkpoint.h"
#include "clock.h"
#include "dataset_manifest.h"
#include "ed25519.h"
#include "file_io.h"
#include "sha256.h"
#include "text_encoding.h"
#include "torch_model.h"

namespace tessera::server {

common::Result<std::string> initialize_state(const StateDir& state) {
    if (std::filesystem::exists(state.database()))
        return common::make_error(state.root().string() + " is initialised already");
    auto& files = posix_file_system();
    for (const auto& dir : {state.blobs(), state.results()})
        if (auto made = files.make_directories(dir); !made) return made.error();
    ::chmod(state.root().c_str(), 0700);
    auto key = common::SigningKey::generate();
    if (auto status = key.save_pem(state.signing_key()); !status) return status.error();
    common::Bytes token_bytes(32);
    if (RAND_bytes(token_bytes.data(), static_cast<int>(token_bytes.size())) != 1)
        return common::make_error("the system random generator failed");
    auto token = common::to_hex(token_bytes);
    if (auto status = common::write_file_atomic(state.operator_token(), common::as_bytes(token + "\n"), 0600); !status)
        return status.error();
    // The database comes last: its presence marks a complete state directory.
    auto store = Store::connect(state.database_url(), true);
    if (!store) return store.error();
    // A shared database (--db) belongs to the server that initialised it: the processes that
    // serve it share that server's key and token (docs/scaling.md), not new ones.
    auto owner = (*store)->setting("server_key_id");
    if (!owner) return owner.error();
    if (*owner)
        return common::make_error("the database belongs to the server with key id " + **owner +
                                  " already; give this process a copy of that server's state directory "
                                  "(docs/scaling.md)");
    if (auto status = (*store)->set_setting("operator_token_sha256", common::sha256_hex(common::as_bytes(token)));
        !status)
        return status.error();
    if (auto status = (*store)->set_setting("server_key_id", key.verify_key().key_id()); !status) return status.error();
    return token;
}

common::Result<TaskConfig> default_task_config(const std::filesystem::path& data_dir, PolicyKind policy,
                                               const std::string& model) {
    auto dataset = common::load_dataset_manifest(data_dir / "dataset.json");
    if (!dataset) return dataset.error();
    TaskConfig c;
    c.merge.kind = policy;
    apply_policy_defaults(c);
    c.data_dir = std::filesystem::absolute(data_dir).lexically_normal().string();
    c.data_kind = dataset->kind;
    c.sample_shape = dataset->sample_shape;
    c.num_classes = static_cast<std::int64_t>(dataset->classes.size());
    c.text_dim = dataset->text_dim;
    c.model = !model.empty()              ? model
              : dataset->kind == "pixels" ? "cnn"
              : dataset->text_dim > 0     ? "dit-tiny-text"
                                          : "dit-tiny";
    c.task_id = dataset->name + "-" + c.model;
    apply_new_task_defaults(c);
    return c;
}

common::Result<std::int64_t> dataset_train_samples(const std::filesystem::path& data_dir) {
    auto dataset = common::load_dataset_manifest(data_dir / "dataset.json");
    if (!dataset) return dataset.error();
    std::int64_t samples = 0;
    for (const auto& file : dataset->train) samples += file.samples;
    return samples;
}

common::Result<TaskRecord> create_task(const StateDir& state, Store& store, const TaskConfig& config,
                                       FileSystem& files) {
    if (auto status = validate_task_config(config); !status) return status.error();
    std::filesystem::path data_dir = config.data_dir;
    auto dataset = common::load_dataset_manifest(data_dir / "dataset.json");
    if (!dataset) return dataset.error();
    if (auto status = common::verify_dataset_files(data_dir, *dataset); !status) return status.error();
    BlobStore blobs(state.blobs(), files);
    std::vector<ShardRecord> shards;
    for (const auto& file : dataset->train) {
        auto ref = blobs.put_file(data_dir / file.file, file.sha256);
        if (!ref) return ref.error();
        shards.push_back({file.sha256, file.bytes, file.samples, 0});
    }
    auto weights = initial_weights(config);
    if (!weights) return weights.error();
    auto calibration = calibrate(config, *weights, data_dir / dataset->validation.file);
    if (!calibration) return calibration.error();
    auto bytes = common::write_checkpoint(*weights, {config.task_id, config.model, 0});
    if (!bytes) return bytes.error();
    auto blob = blobs.put(*bytes);
    if (!blob) return blob.error();
    auto now = system_clock()();
    TaskRecord task{config.task_id, boost::json::serialize(to_json(config)), TaskState::Active, now, 0};
    VersionRecord version0;
    version0.task_id = task.id;
    version0.blob_sha256 = blob->sha256;
    version0.blob_bytes = blob->bytes;
    version0.created_at = now;
    if (auto status = store.create_task(task, shards, version0); !status) return status.error();
    if (auto status = save_calibration(store, task.id, *calibration); !status) return status.error();
    return task;
}

}  // namespace tessera::server
