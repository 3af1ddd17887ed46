// A work unit's blobs into the volunteer's cache: its model (built from the model held and the
// unit's patches when it names them, downloaded whole otherwise, or when building fails), its
// shards, an audit twin's moments and a loss-check unit's result and held-out shard, each retried while the failure is transient and counted by what it was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "blob_cache.h"
#include "logger.h"
#include "protocol.h"
#include "retry.h"

namespace tessera::client {

// The work unit in hand, from its verified envelope to its upload.
struct UnitInHand {
    common::WorkUnit unit;
    std::string envelope_json;
    std::filesystem::path model;
    std::vector<std::filesystem::path> shards;
    std::filesystem::path moments;  // an audit twin's moments to resume (`unit.moments`), if any
    // A loss-check unit's (`unit.check`): the checked result's delta file and the held-out shard.
    std::filesystem::path check_result, held_out;
    std::string upload;  // the packed result, once trained
    // Bytes downloaded for this unit, by what they were (blobs already held count nothing; a
    // twin's moments count with the model).
    std::int64_t model_bytes = 0, patch_bytes = 0, shard_bytes = 0;
    double download_s = 0;  // seconds its downloads took
    common::TrainMetrics metrics;
    std::string device;
};

// The blobs a unit needs, as the cache must keep them while it is in hand.
std::vector<std::string> blobs_of(const common::WorkUnit& unit);

class UnitDownloader {
public:
    struct Settings {
        Url server;  // blobs come from <server>/blobs unless the unit names another base
        RetryPolicy retry;
        std::function<bool()> give_up;     // checked while waiting to retry
        std::function<void()> on_failure;  // after any failed call (among several servers: the turn goes)
        bool progress_bars = false;
    };
    UnitDownloader(BlobCache& cache, HttpClient& http, const common::Logger& log, Settings settings)
        : cache_(cache), http_(http), log_(log), settings_(std::move(settings)) {}

    // Fills `hand`'s model, shards and byte counts. A blob that cannot be had (refused,
    // corrupt twice, the disk, a stop) is the error; a patch that fails is logged and
    // answered by downloading the model whole.
    ApiStatus download(UnitInHand& hand);

private:
    ApiResult<std::filesystem::path> patch_model(UnitInHand& hand, const Url& base);
    // A blob into the cache; `downloaded` grows by its size when it was not held.
    ApiResult<std::filesystem::path> fetch_blob(const common::BlobRef& blob, const Url& base, std::int64_t& downloaded);

    BlobCache& cache_;
    HttpClient& http_;
    const common::Logger& log_;
    Settings settings_;
};

}  // namespace tessera::client
