// Group commit on SQLite's one writer connection: the store's writing calls that arrive while
// a batch commits wait for it to end and then run together, on the thread of whichever of them
// leads, in one transaction with one COMMIT — one sync of the log for them all instead of one
// each (PostgreSQL's commit_delay does the same across sessions). Each call is a savepoint in
// the batch: a call that fails undoes its own writes and the batch goes on; a batch whose
// COMMIT fails fails every call in it, and none of their writes remain.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "connection_pool.h"

namespace tessera::server {

class GroupCommit {
public:
    explicit GroupCommit(ConnectionPool& writers) : writers_(writers) {}

    // Runs `call` in the next batch with the writer bound to the running thread (store_internal.h's
    // current connection) and returns once that batch has committed: empty, or why the batch
    // failed. `call` returns false when it failed: its writes are rolled back, as they are when
    // it throws anything but a DatabaseError (logged and counted; the batch goes on).
    std::string run(const std::function<bool()>& call);
    // Calls waiting for the next batch (for tests).
    std::size_t waiting() {
        std::lock_guard lock(mutex_);
        return waiting_.size();
    }

private:
    struct Entry {
        const std::function<bool()>* call = nullptr;
        std::string failure;
        bool done = false;
    };
    void run_batch(const std::vector<Entry*>& batch);

    // Calls in one batch at most, so the first of them is not kept waiting for long.
    static constexpr std::size_t kMaxBatch = 64;

    ConnectionPool& writers_;
    std::mutex mutex_;
    std::condition_variable finished_;
    std::vector<Entry*> waiting_;
    bool leading_ = false;
};

}  // namespace tessera::server
