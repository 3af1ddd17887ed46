// The checks' cache of decoded shards: each shard read and parsed once while it is kept, the
// least recently used dropped past the budget, and a failed read or parse kept nowhere.
#include <torch/torch.h>

#include <map>

#include "doctest_after_torch.h"
#include "file_io.h"
#include "shard_cache.h"
#include "synthetic_dataset.h"
#include "temp_dir.h"

using namespace tessera;

namespace {

constexpr std::int64_t kSamples = 256;
// A synthetic shard decoded: 256 × 4 × 8 × 8 f32 latents and 256 i64 labels.
constexpr std::size_t kShardBytes = kSamples * 4 * 8 * 8 * sizeof(float) + kSamples * sizeof(std::int64_t);

// Synthetic shards in memory by hash, counting the reads.
struct Shards {
    testing::TempDir dir;
    std::vector<std::string> hashes;
    std::map<std::string, common::Bytes> bytes;
    std::map<std::string, int> reads;

    explicit Shards(int count) {
        for (int i = 0; i < count; ++i) {
            auto file = testing::write_synthetic_shard(dir.path(), "s" + std::to_string(i) + ".safetensors", kSamples,
                                                       static_cast<std::uint32_t>(i + 1));
            hashes.push_back(file.sha256);
            bytes[file.sha256] = common::read_file(dir / file.file, 1 << 24).value();
        }
    }

    server::ShardCache::Reader reader() {
        return [this](const std::string& sha256) -> common::Result<common::Bytes> {
            ++reads[sha256];
            auto it = bytes.find(sha256);
            if (it == bytes.end()) return common::make_error("no blob " + sha256);
            return it->second;
        };
    }
};

}  // namespace

TEST_CASE("a kept shard is read and parsed once, and is the shard") {
    Shards shards(1);
    server::ShardCache cache;
    auto first = cache.get(shards.hashes[0], shards.reader());
    REQUIRE(first);
    auto second = cache.get(shards.hashes[0], shards.reader());
    REQUIRE(second);
    CHECK(shards.reads[shards.hashes[0]] == 1);
    CHECK(first->get() == second->get());
    auto parsed = common::load_shard(shards.bytes[shards.hashes[0]]).value();
    CHECK(torch::equal((*first)->inputs, parsed.inputs));
    CHECK(torch::equal((*first)->labels, parsed.labels));
    CHECK(cache.bytes() == kShardBytes);
}

TEST_CASE("past the budget the least recently used shard goes") {
    Shards shards(3);
    server::ShardCache cache(2 * kShardBytes + kShardBytes / 2);  // room for two
    auto read = shards.reader();
    const auto& a = shards.hashes[0];
    const auto& b = shards.hashes[1];
    const auto& c = shards.hashes[2];
    REQUIRE(cache.get(a, read));
    REQUIRE(cache.get(b, read));
    REQUIRE(cache.get(a, read));  // a is now the more recent
    REQUIRE(cache.get(c, read));  // b goes
    CHECK(cache.shards() == 2);
    CHECK(cache.bytes() == 2 * kShardBytes);
    REQUIRE(cache.get(a, read));
    REQUIRE(cache.get(c, read));
    CHECK(shards.reads[a] == 1);
    CHECK(shards.reads[c] == 1);
    REQUIRE(cache.get(b, read));
    CHECK(shards.reads[b] == 2);
}

TEST_CASE("a shard larger than the budget is returned and not kept") {
    Shards shards(1);
    server::ShardCache cache(kShardBytes / 2);
    auto read = shards.reader();
    auto shard = cache.get(shards.hashes[0], read);
    REQUIRE(shard);
    CHECK((*shard)->size() == kSamples);
    CHECK(cache.shards() == 0);
    REQUIRE(cache.get(shards.hashes[0], read));
    CHECK(shards.reads[shards.hashes[0]] == 2);
}

TEST_CASE("a failed read or a malformed shard is an error, kept nowhere") {
    Shards shards(1);
    server::ShardCache cache;
    auto missing = cache.get("0000", shards.reader());
    REQUIRE_FALSE(missing);
    CHECK(missing.message().find("no blob 0000") != std::string::npos);

    const auto& hash = shards.hashes[0];
    auto good = shards.bytes[hash];
    shards.bytes[hash].resize(good.size() / 2);  // truncated mid-tensor
    auto broken = cache.get(hash, shards.reader());
    REQUIRE_FALSE(broken);
    CHECK(cache.shards() == 0);
    shards.bytes[hash] = good;  // a later read that succeeds is parsed afresh
    auto mended = cache.get(hash, shards.reader());
    REQUIRE(mended);
    CHECK((*mended)->size() == kSamples);
    CHECK(shards.reads[hash] == 2);
}
