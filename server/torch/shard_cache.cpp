// The decoded shards' cache: decoding happens outside the lock, so two probes asking for the
// same new shard at once may both decode it; the first to finish keeps its copy.
#include "shard_cache.h"

namespace tessera::server {
namespace {

std::size_t bytes_of(const common::ShardData& data) {
    std::size_t total = 0;
    for (const auto* tensor : {&data.inputs, &data.labels, &data.text_tokens, &data.text_start, &data.text_len})
        if (tensor->defined()) total += tensor->nbytes();
    return total;
}

}  // namespace

common::Result<std::shared_ptr<const common::ShardData>> ShardCache::get(const std::string& sha256,
                                                                         const Reader& read) {
    if (auto kept = find(sha256)) return kept;
    auto bytes = read(sha256);
    if (!bytes) return bytes.error();
    auto shard = common::load_shard(*bytes);
    if (!shard) return shard.error();
    auto data = std::make_shared<const common::ShardData>(std::move(*shard));
    keep(sha256, data);
    return data;
}

std::shared_ptr<const common::ShardData> ShardCache::find(const std::string& sha256) {
    std::lock_guard lock(mutex_);
    auto it = by_hash_.find(sha256);
    if (it == by_hash_.end()) return nullptr;
    recent_.splice(recent_.begin(), recent_, it->second);
    return it->second->data;
}

void ShardCache::keep(const std::string& sha256, std::shared_ptr<const common::ShardData> data) {
    auto size = bytes_of(*data);
    std::lock_guard lock(mutex_);
    if (size > max_bytes_ || by_hash_.count(sha256) != 0) return;
    recent_.push_front({sha256, std::move(data), size});
    by_hash_[sha256] = recent_.begin();
    bytes_ += size;
    while (bytes_ > max_bytes_) {
        bytes_ -= recent_.back().bytes;
        by_hash_.erase(recent_.back().sha256);
        recent_.pop_back();
    }
}

std::size_t ShardCache::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

std::size_t ShardCache::shards() const {
    std::lock_guard lock(mutex_);
    return recent_.size();
}

}  // namespace tessera::server
