// Stopping a server's connections gracefully; shared by its sessions.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace tessera::server {

// Stopping: no new requests; connections waiting for their next request are closed at once;
// requests that have begun to arrive, or are being read or answered, finish. Thread-safe.
class ConnectionDrain {
public:
    bool draining() const { return draining_.load(); }
    // A session about to wait for its next request says how to close it; false when the
    // server is stopping already (the session ends instead of waiting).
    bool enter_idle(std::uint64_t& ticket, std::function<void()> close) {
        std::lock_guard lock(mutex_);
        if (draining_) return false;
        ticket = next_++;
        idle_.emplace(ticket, std::move(close));
        return true;
    }
    void leave_idle(std::uint64_t ticket) {
        std::lock_guard lock(mutex_);
        idle_.erase(ticket);
    }
    void start() {
        std::map<std::uint64_t, std::function<void()>> idle;
        {
            std::lock_guard lock(mutex_);
            draining_ = true;
            idle.swap(idle_);
        }
        for (auto& [_, close] : idle) close();
    }

private:
    std::mutex mutex_;
    std::atomic<bool> draining_{false};
    std::map<std::uint64_t, std::function<void()>> idle_;
    std::uint64_t next_ = 0;
};

}  // namespace tessera::server
