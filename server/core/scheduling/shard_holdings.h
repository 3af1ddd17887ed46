// Which volunteers hold which dataset shards, from each one's latest work request (its
// `cached_shards`): the scheduler gives a volunteer without a held shard to train one that no
// other volunteer holds, so that each keeps finding its own shards in later epochs (BOINC's
// locality scheduling). In memory only: after a restart the next requests fill it again.
// Not thread-safe: the scheduler guards it with its state lock.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera::server {

class ShardHoldings {
public:
    // Volunteers not heard from in this long stop counting as holders.
    static constexpr std::int64_t kForgetAfterS = 3600;

    // `shards`: SHA-256 hex, as the request listed them.
    void note(const std::string& client_id, const std::vector<std::string>& shards, std::int64_t now);
    // How many volunteers other than `client_id` hold `shard`.
    int held_by_others(const std::string& shard, const std::string& client_id) const;

private:
    struct Held {
        std::int64_t seen = 0;
        std::vector<std::uint64_t> keys;  // sorted, unique
    };
    static std::uint64_t key_of(const std::string& shard);
    void forget(const Held& held);
    void forget_silent(std::int64_t now);

    std::unordered_map<std::string, Held> by_client_;
    std::unordered_map<std::uint64_t, int> holders_;  // by shard key
    std::int64_t last_sweep_ = 0;
};

}  // namespace tessera::server
