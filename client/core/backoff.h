// Exponential backoff with full jitter for network steps: the n-th retry waits a random time
// in [0, min(cap, base·2^n)].
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace tessera::client {

// The first wait and the longest, unless a caller chooses its own.
constexpr std::chrono::milliseconds kBackoffBase = std::chrono::seconds(1);
constexpr std::chrono::milliseconds kBackoffCap = std::chrono::seconds(60);

class Backoff {
public:
    explicit Backoff(std::chrono::milliseconds base = kBackoffBase, std::chrono::milliseconds cap = kBackoffCap,
                     std::uint64_t seed = std::random_device{}())
        : base_(base), cap_(cap), rng_(seed) {}
    // The longest the next wait can be: base·2^attempts, at most the cap.
    std::chrono::milliseconds ceiling() const {
        return std::chrono::milliseconds(std::min<long long>(cap_.count(), base_.count() << std::min(attempt_, 20)));
    }
    std::chrono::milliseconds next() {
        auto longest = ceiling().count();
        ++attempt_;
        return std::chrono::milliseconds(std::uniform_int_distribution<long long>(0, longest)(rng_));
    }
    void reset() { attempt_ = 0; }
    int attempts() const { return attempt_; }

private:
    std::chrono::milliseconds base_;
    std::chrono::milliseconds cap_;
    int attempt_ = 0;
    std::mt19937_64 rng_;
};

}  // namespace tessera::client
