// A doorbell: rung when something happened that others read from the store (the validator
// rings it for each accepted result), it wakes every waiter; a waiter that looked away sees
// from the count that it was rung meanwhile. It carries no data: a waiter reads what is new
// itself (each task's aggregator election reads the accepted results after its cursor), so
// nothing below calls up into what waits. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>

namespace tessera::server {

class Doorbell {
public:
    void ring() {
        {
            std::lock_guard lock(mutex_);
            ++rings_;
        }
        rung_.notify_all();
    }
    std::uint64_t rings() const {
        std::lock_guard lock(mutex_);
        return rings_;
    }
    // Returns once rung past `seen`, once `stop` is set (see wake_all), or after `timeout`.
    void wait(std::uint64_t seen, std::chrono::milliseconds timeout, const std::atomic<bool>& stop) const {
        std::unique_lock lock(mutex_);
        rung_.wait_for(lock, timeout, [&] { return rings_ > seen || stop.load(); });
    }
    // Wakes every waiter without a ring, for one whose `stop` was just set.
    void wake_all() const {
        { std::lock_guard lock(mutex_); }
        rung_.notify_all();
    }

private:
    mutable std::mutex mutex_;
    mutable std::condition_variable rung_;
    std::uint64_t rings_ = 0;
};

}  // namespace tessera::server
