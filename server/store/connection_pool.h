// Database connections lent one store call at a time: a call takes a free one, waiting while
// none is, and gives it back when done (ConnectionLease in store_internal.h).
#pragma once

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "database.h"

namespace tessera::server {

class ConnectionPool {
public:
    void add(std::unique_ptr<Database> connection) {
        {
            std::lock_guard lock(mutex_);
            idle_.push_back(connection.get());
            connections_.push_back(std::move(connection));
        }
        freed_.notify_one();
    }
    bool empty() const { return connections_.empty(); }  // only added to while the store opens

    Database* acquire() {
        std::unique_lock lock(mutex_);
        freed_.wait(lock, [&] { return !idle_.empty(); });
        auto* connection = idle_.back();
        idle_.pop_back();
        return connection;
    }
    void release(Database* connection) {
        {
            std::lock_guard lock(mutex_);
            idle_.push_back(connection);
        }
        freed_.notify_one();
    }

private:
    std::mutex mutex_;
    std::condition_variable freed_;
    std::vector<std::unique_ptr<Database>> connections_;
    std::vector<Database*> idle_;
};

}  // namespace tessera::server
