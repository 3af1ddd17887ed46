// One aggregator per task among the server processes sharing a database: this process runs
// the task's aggregator while it holds the lease `aggregator:<task id>` (Store::claim_lease)
// and follows otherwise. A renewal thread claims the lease every poll (renewing it while held,
// taking it once the holder let it expire), so when the holder dies another process leads
// within lease_s plus two polls. A new leader resumes from the last committed version (its
// checkpoint and the results logged since) with every accepted, unmerged result queued. While
// leading it takes the accepted results from the store, whichever process accepted them: at
// once when this process accepted one (accepted()), otherwise at its next poll. Its commits are fenced by the
// lease, so a process that lost it without noticing (paused, cut off) commits nothing.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "aggregator.h"

namespace tessera::server {

struct ElectionSettings {
    std::string holder;         // this process (process_holder.h)
    std::int64_t lease_s = 15;  // a lease not renewed for this long may be taken
    std::chrono::milliseconds poll{1000};  // zero: no renewal or polling threads
};

class AggregatorElection {
public:
    // Builds a stopped aggregator whose commits carry `fence`.
    using AggregatorFactory = std::function<std::unique_ptr<Aggregator>(const LeaseClaim& fence)>;
    // While following: called with the task's committed version whenever it moved.
    using Follower = std::function<void(const std::string& task_id, std::int64_t version)>;

    // The task it elects for, its lease, the accepted results it hands the aggregator.
    AggregatorElection(TaskStore& tasks, ResultStore& results, LeaseStore& leases, Clock clock, AggregatorFactory make,
                       ElectionSettings settings, Follower follower = {});
    ~AggregatorElection();

    // Claims the lease once and, when this process gets it, starts the aggregator at once (its
    // failure is this call's); then keeps claiming on its own threads (none when poll is zero).
    common::Status start(const std::string& task_id);
    // This process accepted a result of the task: while leading, the accepted results are taken
    // from the store now, on the calling thread (so a validation's job ends with its result
    // queued for merging).
    void accepted();
    void wait_idle(bool through_retries = true);
    // Stops the aggregator if it runs (it checkpoints) and gives the lease up for the next
    // process whenever this one holds it, aggregator or not.
    void stop();
    bool leading() const;
    // This process's aggregator while it leads; null while it follows.
    std::shared_ptr<Aggregator> aggregator() const;
    const std::string& holder() const { return settings_.holder; }

private:
    void renew_loop();
    void manage_loop();
    void take_over();
    void step_down(const std::string& why);
    void queue_accepted();
    void follow();
    bool holding() const;  // under mutex_

    TaskStore& tasks_;
    ResultStore& results_;
    LeaseStore& leases_;
    Clock clock_;
    AggregatorFactory make_;
    ElectionSettings settings_;
    Follower follower_;
    std::string task_id_;
    LeaseClaim claim_;  // "aggregator:<task id>", this process

    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::shared_ptr<Aggregator> aggregator_;  // while leading
    std::int64_t held_until_ = 0;             // clock time the lease is held until; 0: not held
    std::set<std::string> queued_;            // accepted results handed to the aggregator
    std::int64_t followed_version_ = -1;
    bool stopping_ = false;
    std::thread renewer_;
    std::thread manager_;
};

}  // namespace tessera::server
