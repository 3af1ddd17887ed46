// A volunteer's bandwidth cap (--max-download-mbps, --max-upload-mbps): a token bucket that
// spend() draws from, sleeping until the bytes fit (or the transfer is interrupted). It starts empty and holds at most one
// second's bytes, so an idle spell saves up no more than a second's burst. Safe from several
// threads (they queue on it); the clock and the sleep are replaceable for tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>

namespace tessera::client {

class RateLimiter {
public:
    using Clock = std::function<std::chrono::steady_clock::time_point()>;
    using Sleep = std::function<void(std::chrono::nanoseconds)>;

    explicit RateLimiter(double bytes_per_second, Clock clock = {}, Sleep sleep = {});
    // Megabits per second (as an Internet connection is sold) in bytes per second.
    static double bytes_per_second_of_mbps(double mbps) { return mbps * 1e6 / 8; }

    double bytes_per_second() const { return rate_; }
    // Returns true once `bytes` more keep the stream under the rate, or false as soon as
    // `interrupted` turns true while it waits (looked at every kSlice): the wait not yet slept
    // stays owed.
    static constexpr std::chrono::milliseconds kSlice{100};
    bool spend(std::uint64_t bytes, const std::function<bool()>& interrupted = {});

private:
    double rate_;
    Clock clock_;
    Sleep sleep_;
    std::mutex mutex_;
    double tokens_ = 0;
    std::chrono::steady_clock::time_point last_;
};

}  // namespace tessera::client
