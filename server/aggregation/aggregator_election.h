// One aggregator per task among the server processes sharing a database: this process runs
// the task's aggregator while it holds the lease `aggregator:<task id>` (Store::claim_lease)
// and follows otherwise. A renewal thread claims the lease every poll (renewing it while held,
// taking it once the holder let it expire), so when the holder dies another process leads
// within lease_s plus two polls. A new leader resumes from the last committed version (its
// checkpoint and the results logged since) with every accepted, unmerged result queued. While
// leading it feeds the aggregator as BOINC's assimilator is fed: the ids of the task's results
// accepted after its cursor (the acceptance sequence number, assignments.accepted_seq), read
// from the store whichever process accepted them, when the doorbell of accepted results rings
// (this process's validator accepted one) and at every poll (another process's did). Nothing
// calls it on an acceptance. Its commits are fenced by the lease, so a process that lost it
// without noticing (paused, cut off) commits nothing.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <atomic>
#include <string>
#include <thread>

#include "aggregator.h"
#include "clock.h"
#include "doorbell.h"

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

    // The task it elects for, its lease, the accepted results it hands the aggregator and the
    // doorbell rung when this process accepts one.
    AggregatorElection(TaskStore& tasks, ResultStore& results, LeaseStore& leases, const Doorbell& accepted,
                       Clock clock, AggregatorFactory make, ElectionSettings settings, Follower follower = {});
    ~AggregatorElection();

    // Claims the lease once and, when this process gets it, starts the aggregator at once (its
    // failure is this call's); then keeps claiming on its own threads (none when poll is zero).
    common::Status start(const std::string& task_id);
    // While leading: the results this process accepted so far handed over (read on the calling
    // thread unless the last read came after the last ring; other processes' acceptances come
    // at the next poll), then until the aggregator is idle.
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
    bool reclaimed();

    TaskStore& tasks_;
    ResultStore& results_;
    LeaseStore& leases_;
    const Doorbell& accepted_;
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
    std::int64_t cursor_ = 0;                 // results accepted through this sequence number are handed over
    std::uint64_t rings_read_ = 0;            // the doorbell's count before the last read of them
    std::int64_t followed_version_ = -1;
    bool stopping_ = false;
    std::atomic<bool> stop_waiting_{false};  // stopping_, for the wait on the doorbell
    std::thread renewer_;
    std::thread manager_;
};

}  // namespace tessera::server
