// WorkPool: a counted thread pool.
#include "work_pool.h"

#include <boost/asio/post.hpp>

#include "executor.h"
#include "worker_guard.h"

namespace tessera::server {

WorkPool::WorkPool(std::size_t threads) {
    if (threads > 0) pool_ = std::make_unique<boost::asio::thread_pool>(threads);
}

WorkPool::~WorkPool() { join(); }

Executor WorkPool::executor() {
    return [this](std::function<void()> job) { run(std::move(job)); };
}

void WorkPool::run(std::function<void()> job) {
    auto counted = [this, job = std::move(job)] {
        common::run_guarded("work pool", job);  // a job that throws is logged; the count goes down
        std::lock_guard lock(mutex_);
        --pending_;
        idle_.notify_all();
    };
    bool here;
    {
        std::lock_guard lock(mutex_);
        if (joined_) return;  // stopping: a result left unvalidated is validated at the next start
        ++pending_;
        here = !pool_;
    }
    if (here)
        counted();
    else
        boost::asio::post(*pool_, std::move(counted));
}

void WorkPool::wait_idle() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return pending_ == 0; });
}

void WorkPool::join() {
    {
        std::lock_guard lock(mutex_);
        if (joined_) return;
        joined_ = true;
    }
    if (pool_) pool_->join();
}

}  // namespace tessera::server
