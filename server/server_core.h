// The server's components without its HTTP front end, built in one place: the store, the
// key, blobs and result files, published models, the scheduler, the result intake, the
// validation stage and its validator (on a work pool: work_pool.h), the transitioner and the served tasks (each with its
// probes, aggregator election and dashboard facts: task_runtimes.h). ServerApp adds the HTTP
// server, the API, the dashboard and the transitioner's timer; the fleet simulator and the
// ingest benchmark (InProcessServer) drive it as it is. What differs between them is only what
// ServerOptions gives (clock, file system, threads, seeds), so the simulator measures the
// server that runs. Thread-safe where its parts are.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>

#include "blob_store.h"
#include "delta_caps.h"
#include "ed25519.h"
#include "executor.h"
#include "model_cache.h"
#include "published_models.h"
#include "result_files.h"
#include "scheduler.h"
#include "server_metrics.h"
#include "server_options.h"
#include "store.h"
#include "task_runtimes.h"
#include "transitioner.h"
#include "validation_stage.h"
#include "validator.h"
#include "volunteer_service.h"

namespace tessera::server {

class ServerCore {
public:
    // Opens the state directory's database and key, removes orphan files and builds the
    // components. Serves no task before start().
    static common::Result<std::unique_ptr<ServerCore>> build(ServerOptions options);
    ~ServerCore();

    // Serves the tasks (a task's aggregator runs here when this process gets its lease),
    // starts the validation stage (it claims the results nobody validates, such as those of
    // this host's processes that died) and from then on notices new and finished tasks every
    // task_poll_ms.
    common::Status start();
    // Runs the queued validations (their accepted results reach the aggregators), gives up the
    // claims on results left unvalidated, then stops every task: each aggregator checkpoints
    // and lets its lease go.
    void stop();
    // Blocks until no validation, evaluation or merge is queued or running.
    void wait_idle();

    const ServerOptions& options() const;
    const common::SigningKey& key() const;
    Executor executor();  // the work pool's
    Store& store();
    BlobStore& blobs();
    FileSystem& files();  // the state directory's
    PublishedModels& published();
    ModelCache& models();
    DeltaCaps& delta_caps();
    ServerMetrics& metrics();
    TaskRuntimes& tasks();
    Scheduler& scheduler();
    // The volunteers' work and result requests, as the API and the in-process server make them.
    VolunteerService& volunteers();
    Validator& validator();
    ValidationStage& validation();
    Transitioner& transitioner();

    struct Parts;

private:
    explicit ServerCore(std::unique_ptr<Parts> parts);
    std::unique_ptr<Parts> parts_;
};

// Deletes temp files and blobs/results the database does not refer to (after a crash), except
// those written less than `spare_younger_than` ago (another process on a shared database may
// be writing them) unless they are temp files of a dead process of this host.
// A directory that cannot be listed is an error (the server does not start on a state
// directory it cannot read); a file that cannot be removed is logged and left for the next start.
common::Result<std::size_t> remove_orphan_files(Store& store, const StateDir& state, FileSystem& files,
                                                std::chrono::seconds spare_younger_than = {});

}  // namespace tessera::server
