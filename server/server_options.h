// What a server is given: the state directory, the HTTP settings, the threads, the clock, the
// file system, the probes and sample renderers, the checkpoint and lease cadences. Every
// program that runs the server's components builds them from this (server_core.h), so they
// differ only here: `tessera-server run`, the in-process tests, the fleet simulator and the
// ingest benchmark.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "aggregator.h"
#include "aggregator_election.h"
#include "clock.h"
#include "file_system.h"
#include "http_server.h"
#include "model_probe.h"
#include "sample_gallery.h"
#include "state_dir.h"
#include "task_config.h"
#include "validation_stage.h"

namespace tessera::server {

struct ServerOptions {
    StateDir state{"."};
    HttpSettings http;
    std::string blob_base_url;        // --blob-url-base; empty: this server's /blobs
    std::size_t io_threads = 2;       // socket I/O only
    std::size_t handler_threads = 4;  // answering requests: database, hashing, fsync, signing
    // Loss checks, evaluations and sample drawings (LibTorch's work: each holds a probe, so at
    // most this many run at once); 0: on the thread that hands them over, with one probe.
    std::size_t work_threads = 2;
    // Validations, which mostly wait on the database (each takes one of the work threads'
    // probes for a loss check) and hold their result decoded, 4 bytes a parameter; 0: on the
    // thread that stored the result (the fleet simulator: an upload is validated when it returns).
    std::size_t validation_threads = 8;
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
    double merge_retry_s = AggregatorHooks{}.retry_s;
    // With downlink patches: a full checkpoint every this many versions or seconds (and at
    // stop); the versions between are stored as patches.
    std::int64_t checkpoint_every = AggregatorHooks{}.checkpoint_every;
    std::int64_t checkpoint_interval_s = AggregatorHooks{}.checkpoint_interval_s;
    bool checkpoint_at_stop = true;  // false: leave the state as kill -9 would (tests)
    // Retention: versions before the newest this many checkpoints lose their files (pinned
    // ones and those live units need are kept); 0 keeps everything.
    std::int64_t keep_checkpoints = AggregatorHooks{}.keep_checkpoints;
    // New volunteers one network address may register per hour (Sybil limit); 0: no limit.
    std::int64_t registrations_per_hour = 20;
    // Client releases older than this are refused at registration; older than the recommended
    // one are told to update (GET /api/v1/server). "": none.
    std::string min_client_version;
    std::string recommended_client_version;
    // Several processes on one database: the task's aggregator runs in the one holding its
    // lease; another takes over when it has not been renewed for this long (seconds).
    std::int64_t aggregator_lease_s = ElectionSettings{}.lease_s;
    std::string process_name;  // in the lease table; empty: host:pid:random
    // The lease is renewed, and results other processes accepted looked for, this often; 0: the
    // lease taken at start is kept with no thread renewing it (one process, a lease that outlasts
    // the run: the fleet simulator, whose database then changes only when it is driven).
    std::int64_t election_poll_ms = ElectionSettings{}.poll.count();
    // Results whose validation claim lapsed (an error, a process gone) are claimed this often;
    // 0: only by ValidationStage::poll() (tests, the fleet simulator).
    std::int64_t validation_poll_ms = ValidationStageSettings{}.poll.count();
    // Tasks created or finished while the server runs are noticed this often; 0: only by
    // refresh_tasks() (tests).
    std::int64_t task_poll_ms = 1000;
    // Seeds the scheduler's and the validator's random choices; none: the system's randomness.
    std::optional<std::uint64_t> seed;
    // After each version the dashboard's loss curve is evaluated on the task's eval_samples;
    // false: not (the fleet simulator draws its own curve).
    bool loss_curve = true;
};

}  // namespace tessera::server
