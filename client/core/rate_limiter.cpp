// The token bucket: refill by the time passed, draw, and sleep off a deficit.
#include "rate_limiter.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

namespace tessera::client {

RateLimiter::RateLimiter(double bytes_per_second, Clock clock, Sleep sleep)
    : rate_(bytes_per_second), clock_(clock ? std::move(clock) : [] { return std::chrono::steady_clock::now(); }),
      sleep_(sleep ? std::move(sleep) : [](std::chrono::nanoseconds wait) { std::this_thread::sleep_for(wait); }),
      last_(clock_()) {
    if (!(rate_ > 0)) throw std::invalid_argument("a rate limit must be above 0 bytes per second");
}

bool RateLimiter::spend(std::uint64_t bytes, const std::function<bool()>& interrupted) {
    std::lock_guard lock(mutex_);
    auto now = clock_();
    tokens_ = std::min(rate_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
    tokens_ -= static_cast<double>(bytes);
    if (tokens_ >= 0) return true;
    auto owed = std::chrono::nanoseconds(static_cast<std::int64_t>(-tokens_ / rate_ * 1e9));
    while (owed > std::chrono::nanoseconds::zero()) {
        if (interrupted && interrupted()) {
            tokens_ = -std::chrono::duration<double>(owed).count() * rate_;
            last_ = clock_();
            return false;
        }
        auto slice = std::min<std::chrono::nanoseconds>(owed, kSlice);
        sleep_(slice);
        owed -= slice;
    }
    tokens_ = 0;  // the deficit was slept off
    last_ = clock_();
    return true;
}

}  // namespace tessera::client
