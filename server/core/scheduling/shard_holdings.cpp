// Shard holders, counted per shard.
#include "shard_holdings.h"

#include <algorithm>

namespace tessera::server {

std::uint64_t ShardHoldings::key_of(const std::string& shard) {
    // The first 16 hex digits of a SHA-256: distinct for any real number of shards.
    std::uint64_t key = 0;
    for (std::size_t i = 0; i < 16 && i < shard.size(); ++i) {
        char c = shard[i];
        auto digit = static_cast<std::uint64_t>(c >= 'a' ? c - 'a' + 10 : c >= 'A' ? c - 'A' + 10 : c - '0');
        key = (key << 4) | (digit & 15);
    }
    return key;
}

void ShardHoldings::forget(const Held& held) {
    for (auto key : held.keys) {
        auto found = holders_.find(key);
        if (found != holders_.end() && --found->second <= 0) holders_.erase(found);
    }
}

void ShardHoldings::forget_silent(std::int64_t now) {
    if (now - last_sweep_ < 60) return;
    last_sweep_ = now;
    for (auto it = by_client_.begin(); it != by_client_.end();) {
        if (now - it->second.seen <= kForgetAfterS) {
            ++it;
            continue;
        }
        forget(it->second);
        it = by_client_.erase(it);
    }
}

void ShardHoldings::note(const std::string& client_id, const std::vector<std::string>& shards, std::int64_t now) {
    Held held{now, {}};
    for (const auto& shard : shards) held.keys.push_back(key_of(shard));
    std::sort(held.keys.begin(), held.keys.end());
    held.keys.erase(std::unique(held.keys.begin(), held.keys.end()), held.keys.end());
    auto& entry = by_client_[client_id];
    forget(entry);
    for (auto key : held.keys) ++holders_[key];
    entry = std::move(held);
    forget_silent(now);
}

int ShardHoldings::held_by_others(const std::string& shard, const std::string& client_id) const {
    auto key = key_of(shard);
    auto found = holders_.find(key);
    int count = found == holders_.end() ? 0 : found->second;
    auto mine = by_client_.find(client_id);
    if (mine != by_client_.end() && std::binary_search(mine->second.keys.begin(), mine->second.keys.end(), key))
        --count;
    return count;
}

}  // namespace tessera::server
