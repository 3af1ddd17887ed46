// The running server: wires the store, key, blobs, scheduler, validator (on a work pool),
// the served tasks (each with its probes and aggregator: task_runtimes.h), transitioner timer
// and HTTP server together, resumes after a crash
// (orphan files removed, stored results revalidated, accepted results re-merged) and shuts
// down in order. Used by `tessera-server run` and by the in-process tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "aggregator_election.h"
#include "http_server.h"
#include "model_probe.h"
#include "sample_gallery.h"
#include "state_dir.h"
#include "store.h"
#include "transitioner.h"

namespace tessera::server {

struct ServerOptions {
    StateDir state{"."};
    HttpSettings http;
    std::string blob_base_url;         // --blob-url-base; empty: this server's /blobs
    std::size_t io_threads = 2;        // socket I/O only
    std::size_t handler_threads = 4;   // answering requests: database, hashing, fsync, signing
    std::size_t work_threads = 2;      // validation loss checks and evaluations
    std::int64_t tick_interval_s = 5;  // transitioner period
    Clock clock;                       // empty: the system clock
    // Builds probes for a task; empty: LibTorch probes on the task's validation shard.
    std::function<common::Result<ModelProbeFactory>(const TaskConfig&)> probe_factory;
    // Builds the dashboard's sample renderer for a task (none: the model cannot draw);
    // empty: LibTorch sampling through the dataset's decoder, for DiT presets.
    std::function<std::optional<SampleRendererFactory>(const TaskConfig&)> sample_renderer;
    // Blobs and result files go through this; null: the POSIX file system (tests inject faults).
    FileSystem* file_system = nullptr;
    // After a failed commit the aggregator restores the last committed version and retries
    // its results this many seconds later.
    double merge_retry_s = 5;
    // With downlink patches: a full checkpoint every this many versions or seconds (and at
    // stop); the versions between are stored as patches.
    std::int64_t checkpoint_every = 20;
    std::int64_t checkpoint_interval_s = 300;
    bool checkpoint_at_stop = true;  // false: leave the state as kill -9 would (tests)
    // Retention: versions before the newest this many checkpoints lose their files (pinned
    // ones and those live units need are kept); 0 keeps everything.
    std::int64_t keep_checkpoints = 3;
    // New volunteers one network address may register per hour (Sybil limit); 0: no limit.
    std::int64_t registrations_per_hour = 20;
    // Client releases older than this are refused at registration; older than the recommended
    // one are told to update (GET /api/v1/server). "": none.
    std::string min_client_version;
    std::string recommended_client_version;
    // Several processes on one database: the task's aggregator runs in the one holding its
    // lease; another takes over when it has not been renewed for this long (seconds).
    std::int64_t aggregator_lease_s = 15;
    std::string process_name;  // in the lease table; empty: host:pid:random
    // Tasks created or finished while the server runs are noticed this often; 0: only by
    // refresh_tasks() (tests).
    std::int64_t task_poll_ms = 1000;
};

class ServerApp {
public:
    static common::Result<std::unique_ptr<ServerApp>> start(ServerOptions options);
    ~ServerApp();
    // Stops accepting, finishes queued validations and merges, closes the database.
    void stop();

    std::uint16_t port() const;
    Store& store();
    Transitioner& transitioner();
    // Whether this process runs the task's aggregator now (it holds the task's lease).
    bool leading(const std::string& task_id) const;
    // Serves tasks created (and drops tasks finished) since the last look; the watcher does
    // this every task_poll_ms.
    common::Status refresh_tasks();
    // Blocks until no validation or merge is queued or running (tests).
    void wait_idle();

    struct Parts;

private:
    explicit ServerApp(std::unique_ptr<Parts> parts);
    std::unique_ptr<Parts> parts_;
};

// Deletes temp files and blobs/results the database does not refer to (after a crash), except
// those written less than `spare_younger_than` ago (another process on a shared database may
// be writing them) unless they are temp files of a dead process of this host.
common::Result<std::size_t> remove_orphan_files(Store& store, const StateDir& state,
                                                std::chrono::seconds spare_younger_than = {});

}  // namespace tessera::server
