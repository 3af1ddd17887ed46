// Where the server's background work runs (validations, evaluations, the transitioner's
// retries): a pool of threads whose jobs can be waited for, or, with no threads, the thread
// that hands the job over (the fleet simulator validates each upload before it returns; a
// component that hands a job over while holding a lock the job takes must then not be given
// this pool, as the dashboard's loss curve is not).
#pragma once

#include <boost/asio/thread_pool.hpp>

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>

#include "executor.h"

namespace tessera::server {

class WorkPool {
public:
    explicit WorkPool(std::size_t threads);
    ~WorkPool();

    // Runs a job on the pool (or at once, with no threads). Valid while the pool lives.
    Executor executor();
    // Blocks until no job is queued or running.
    void wait_idle();
    // Runs the queued jobs, then stops the threads; jobs handed over later are dropped (the
    // server is stopping: a result left unvalidated is validated at its next start).
    void join();

private:
    void run(std::function<void()> job);

    std::unique_ptr<boost::asio::thread_pool> pool_;  // null: jobs run on the caller's thread
    std::mutex mutex_;
    std::condition_variable idle_;
    std::size_t pending_ = 0;
    bool joined_ = false;
};

}  // namespace tessera::server
