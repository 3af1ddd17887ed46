// Group commit: leader election among waiting calls, and one batch's transaction.
#include "group_commit.h"

#include <algorithm>
#include <exception>

#include "store_internal.h"
#include "worker_guard.h"

namespace tessera::server {

std::string GroupCommit::run(const std::function<bool()>& call) {
    Entry entry;
    entry.call = &call;
    std::unique_lock lock(mutex_);
    waiting_.push_back(&entry);
    while (!entry.done) {
        if (leading_) {
            finished_.wait(lock);
            continue;
        }
        // No batch runs: this call leads the next one, of the calls waiting now (its own among them).
        leading_ = true;
        auto count = std::min(waiting_.size(), kMaxBatch);
        std::vector<Entry*> batch(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(count));
        waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(count));
        lock.unlock();
        run_batch(batch);
        lock.lock();
        for (auto* done : batch) done->done = true;
        leading_ = false;
        finished_.notify_all();
    }
    return entry.failure;
}

void GroupCommit::run_batch(const std::vector<Entry*>& batch) {
    ConnectionLease lease(writers_.acquire(), [this](Database* connection) { writers_.release(connection); });
    auto& db = *current_connection;
    try {
        Transaction transaction(db);
        db.set_grouped(true);
        struct Ungroup {
            Database& db;
            ~Ungroup() { db.set_grouped(false); }
        } ungroup{db};
        for (auto* entry : batch) {
            db.exec("SAVEPOINT batch_call");
            bool kept = false;
            std::exception_ptr database_error;  // fails the batch, as a failed statement does
            // A call that throws anything else fails alone: logged, and its writes are undone.
            bool returned = common::run_guarded("group commit", [&] {
                try {
                    kept = (*entry->call)();
                } catch (const DatabaseError&) {
                    database_error = std::current_exception();
                }
            });
            if (database_error) std::rethrow_exception(database_error);
            if (!returned) entry->failure = "the call threw (see the server's log)";
            db.exec(kept ? "RELEASE batch_call" : "ROLLBACK TO batch_call; RELEASE batch_call");
        }
        db.set_grouped(false);
        transaction.commit();
    } catch (const DatabaseError& error) {
        for (auto* entry : batch) entry->failure = error.what();
    }
}

}  // namespace tessera::server
