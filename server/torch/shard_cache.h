// Decoded training shards by hash, shared by a task's probes: the opening losses, loss checks
// and replays of successive results read the same few shards (replicas and twins repeat a
// unit, and each volunteer keeps training the shards it holds), so each shard is decompressed
// and parsed once and kept while it is among the most recently used within a byte budget.
// Thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "bytes.h"
#include "result.h"
#include "torch/shard_data.h"

namespace tessera::server {

// A task's budget for decoded shards: every shard of the Fashion-MNIST latents (15 × 4.2 MB)
// several times over, or a few dozen of a 256-token text dataset's.
constexpr std::size_t kShardCacheBytes = std::size_t{256} << 20;

class ShardCache {
public:
    using Reader = std::function<common::Result<common::Bytes>(const std::string& sha256)>;

    explicit ShardCache(std::size_t max_bytes = kShardCacheBytes) : max_bytes_(max_bytes) {}

    // The shard with this hash, decoded: kept, or read through `read`, parsed and kept (a shard
    // larger than the whole budget is returned without being kept).
    common::Result<std::shared_ptr<const common::ShardData>> get(const std::string& sha256, const Reader& read);

    std::size_t bytes() const;
    std::size_t shards() const;

private:
    struct Entry {
        std::string sha256;
        std::shared_ptr<const common::ShardData> data;
        std::size_t bytes = 0;
    };

    std::shared_ptr<const common::ShardData> find(const std::string& sha256);
    void keep(const std::string& sha256, std::shared_ptr<const common::ShardData> data);

    std::size_t max_bytes_;
    mutable std::mutex mutex_;
    std::list<Entry> recent_;  // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> by_hash_;
    std::size_t bytes_ = 0;
};

}  // namespace tessera::server
