// A GPU's micro-batch from its free memory: the line through two probe steps, the headroom,
// and the cases where the probes cannot tell (the whole batch then, as before).
#include <doctest/doctest.h>

#include "training/memory_fit.h"

using tessera::client::MemoryUse;
using tessera::client::micro_batch_for_memory;

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// A step that takes `fixed` plus `per_sample` for each row.
MemoryUse step_at(std::int64_t rows, std::int64_t fixed, std::int64_t per_sample) {
    return {rows, fixed + rows * per_sample};
}

}  // namespace

TEST_CASE("the micro-batch fills the free memory within the headroom") {
    auto small = step_at(4, 2000 * kMiB, 100 * kMiB), large = step_at(16, 2000 * kMiB, 100 * kMiB);
    // 0.85 × 10 000 MiB − 2 000 MiB fixed = 6 500 MiB: 65 rows of 100 MiB.
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 256) == 65);
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 256, 1.0) == 80);
    // The step's memory at the chosen micro-batch is within the planned share.
    auto rows = micro_batch_for_memory(small, large, 24000 * kMiB, 512);
    CHECK(rows > 16);
    CHECK(2000 * kMiB + rows * 100 * kMiB <= static_cast<std::int64_t>(0.85 * 24000 * kMiB));
    CHECK(2000 * kMiB + (rows + 1) * 100 * kMiB > static_cast<std::int64_t>(0.85 * 24000 * kMiB));
}

TEST_CASE("a batch that fits runs whole") {
    auto small = step_at(4, 2000 * kMiB, 100 * kMiB), large = step_at(16, 2000 * kMiB, 100 * kMiB);
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 64) == 0);
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 65) == 0);
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 66) == 65);
}

TEST_CASE("memory for less than one row still trains one row at a time") {
    auto small = step_at(4, 2000 * kMiB, 100 * kMiB), large = step_at(16, 2000 * kMiB, 100 * kMiB);
    CHECK(micro_batch_for_memory(small, large, 2000 * kMiB, 256) == 1);
}

TEST_CASE("probes that cannot tell leave the whole batch to the out-of-memory retry") {
    auto small = step_at(4, 2000 * kMiB, 100 * kMiB), large = step_at(16, 2000 * kMiB, 100 * kMiB);
    // The allocator's rounding hid the growth (a small model): nothing to fit.
    CHECK(micro_batch_for_memory({4, 500 * kMiB}, {16, 500 * kMiB}, 1000 * kMiB, 256) == 0);
    CHECK(micro_batch_for_memory({4, 600 * kMiB}, {16, 500 * kMiB}, 1000 * kMiB, 256) == 0);
    // The free memory could not be read, or the probes are not two sizes.
    CHECK(micro_batch_for_memory(small, large, -1, 256) == 0);
    CHECK(micro_batch_for_memory(small, small, 10000 * kMiB, 256) == 0);
    CHECK(micro_batch_for_memory(large, small, 10000 * kMiB, 256) == 0);
}

TEST_CASE("a fixed part measured below zero counts as none") {
    // Steeper growth between the probes than their sizes account for: the line's fixed part
    // is negative, and only the rows' share is planned for.
    MemoryUse small{4, 100 * kMiB}, large{16, 1300 * kMiB};  // 100 MiB a row, −300 MiB fixed
    CHECK(micro_batch_for_memory(small, large, 10000 * kMiB, 256) == 85);
}
