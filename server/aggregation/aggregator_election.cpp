// AggregatorElection: the lease's renewal thread and the thread that starts, stops and feeds
// this process's aggregator as the lease comes and goes.
#include "aggregator_election.h"

#include <algorithm>
#include <optional>

#include "clock.h"
#include "logger.h"
#include "worker_guard.h"

namespace tessera::server {

AggregatorElection::AggregatorElection(TaskStore& tasks, ResultStore& results, LeaseStore& leases,
                                       const Doorbell& accepted, Clock clock, AggregatorFactory make,
                                       ElectionSettings settings, Follower follower)
    : tasks_(tasks), results_(results), leases_(leases), accepted_(accepted), clock_(std::move(clock)),
      make_(std::move(make)), settings_(std::move(settings)), follower_(std::move(follower)) {}

AggregatorElection::~AggregatorElection() { stop(); }

common::Status AggregatorElection::start(const std::string& task_id) {
    task_id_ = task_id;
    claim_ = {"aggregator:" + task_id, settings_.holder};
    auto now = clock_();
    auto claimed = leases_.claim_lease(claim_, now, now + settings_.lease_s);
    if (!claimed) return claimed.error();
    if (*claimed) {
        std::shared_ptr<Aggregator> aggregator = make_(claim_);
        if (auto status = aggregator->start(task_id); !status) {
            (void)leases_.release_lease(claim_);
            return status;
        }
        std::lock_guard lock(mutex_);
        held_until_ = now + settings_.lease_s;
        cursor_ = aggregator->accepted_through();
        aggregator_ = std::move(aggregator);
    } else {
        common::process_log().info("aggregator_follows",
                                   "another process runs the aggregator of task " + task_id +
                                       "; this one follows and takes over if that process stops renewing its lease",
                                   {{"task_id", task_id}});
    }
    if (settings_.poll.count() <= 0) return {};  // the lease taken now is kept, unrenewed
    renewer_ = std::thread([this] { renew_loop(); });
    manager_ = std::thread([this] { manage_loop(); });
    return {};
}

bool AggregatorElection::holding() const { return held_until_ > clock_(); }

bool AggregatorElection::leading() const {
    std::lock_guard lock(mutex_);
    return aggregator_ != nullptr;
}

std::shared_ptr<Aggregator> AggregatorElection::aggregator() const {
    std::lock_guard lock(mutex_);
    return aggregator_;
}

void AggregatorElection::renew_loop() {
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        lock.unlock();
        auto now = clock_();
        std::optional<bool> held;  // unknown when the claim failed: the lease runs out unless a later claim succeeds
        common::run_guarded("lease renewal", [&] {
            auto claimed = leases_.claim_lease(claim_, now, now + settings_.lease_s);
            if (claimed)
                held = *claimed;
            else
                common::process_log().warning("lease", "renewing the lease " + claim_.name + ": " + claimed.message());
        });
        lock.lock();
        if (held) held_until_ = *held ? now + settings_.lease_s : 0;
        changed_.wait_for(lock, settings_.poll, [this] { return stopping_; });
    }
}

// The lease is looked at every poll; a ring in between only feeds a running aggregator (a
// ring is news of an acceptance, not of the lease).
void AggregatorElection::manage_loop() {
    using steady = std::chrono::steady_clock;
    auto next_poll = steady::now();
    std::unique_lock lock(mutex_);
    while (!stopping_) {
        bool lead = holding();
        bool running = aggregator_ != nullptr;
        lock.unlock();
        const auto seen = accepted_.rings();  // before the read: a ring during it is not missed
        const bool polling = steady::now() >= next_poll;
        if (polling) next_poll = steady::now() + settings_.poll;
        common::run_guarded("aggregator election", [&] {
            if (polling && lead && !running)
                take_over();
            else if (polling && !lead && running && !reclaimed())
                step_down("its lease ran out or another process took it");
            else if (running)
                queue_accepted();
            else if (polling)
                follow();
        });
        auto until_poll = std::chrono::duration_cast<std::chrono::milliseconds>(next_poll - steady::now());
        accepted_.wait(seen, std::max(until_poll, std::chrono::milliseconds{0}), stop_waiting_);
        lock.lock();
    }
}

// A lapsed lease (the renewal came late: a paused process, a clock that jumped) that no
// other process took is claimed again rather than given up.
bool AggregatorElection::reclaimed() {
    auto now = clock_();
    auto claimed = leases_.claim_lease(claim_, now, now + settings_.lease_s);
    if (!claimed || !*claimed) return false;
    std::lock_guard lock(mutex_);
    held_until_ = now + settings_.lease_s;
    return true;
}

void AggregatorElection::take_over() {
    std::shared_ptr<Aggregator> aggregator = make_(claim_);
    if (auto status = aggregator->start(task_id_); !status) {
        common::process_log().warning("aggregator_takeover", "taking over the aggregator of task " + task_id_ + ": " +
                                                                 status.message() + " (tried again in " +
                                                                 std::to_string(settings_.poll.count()) + " ms)");
        return;
    }
    common::process_log().info("aggregator_leads",
                               "this process now runs the aggregator of task " + task_id_ + " (from version " +
                                   std::to_string(aggregator->version()) + ")",
                               {{"task_id", task_id_}, {"version", aggregator->version()}});
    std::lock_guard lock(mutex_);
    cursor_ = aggregator->accepted_through();
    aggregator_ = std::move(aggregator);
}

void AggregatorElection::step_down(const std::string& why) {
    std::shared_ptr<Aggregator> aggregator;
    {
        std::lock_guard lock(mutex_);
        aggregator = std::move(aggregator_);
    }
    common::process_log().info("aggregator_stops", "this process no longer runs the aggregator (" + why + ")",
                               {{"task_id", task_id_}});
    aggregator->stop(false);  // no checkpoint: the task's files are the new leader's now
}

// Accepted results reach the aggregator only through the database, from this process or
// another: those accepted after the cursor, in acceptance order.
void AggregatorElection::queue_accepted() {
    std::int64_t after = 0;
    {
        std::lock_guard lock(mutex_);
        if (!aggregator_) return;
        after = cursor_;
    }
    const auto rung = accepted_.rings();  // before the read: a ring during it is read again
    auto fresh = results_.accepted_after(task_id_, after);
    if (!fresh) {
        common::process_log().error("aggregator_poll", "reading accepted results: " + fresh.message());
        return;
    }
    std::lock_guard lock(mutex_);
    if (!aggregator_) return;
    rings_read_ = std::max(rings_read_, rung);
    for (auto& a : *fresh) {
        if (a.seq <= cursor_) continue;  // handed over meanwhile (by another caller, or at a take-over)
        cursor_ = a.seq;
        aggregator_->enqueue(std::move(a));
    }
}

void AggregatorElection::follow() {
    if (!follower_) return;
    auto task = tasks_.task(task_id_);
    if (!task || !*task || (*task)->version == followed_version_) return;
    followed_version_ = (*task)->version;
    follower_(task_id_, followed_version_);
}

void AggregatorElection::wait_idle(bool through_retries) {
    bool unread = false;
    {
        std::lock_guard lock(mutex_);
        unread = accepted_.rings() != rings_read_;
    }
    if (unread) queue_accepted();
    std::shared_ptr<Aggregator> aggregator;
    {
        std::lock_guard lock(mutex_);
        aggregator = aggregator_;
    }
    if (aggregator) aggregator->wait_idle(through_retries);
}

void AggregatorElection::stop() {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return;
        stopping_ = true;
    }
    stop_waiting_ = true;
    changed_.notify_all();
    accepted_.wake_all();
    if (renewer_.joinable()) renewer_.join();
    if (manager_.joinable()) manager_.join();
    queue_accepted();  // those accepted since the last look are merged before the checkpoint at stop
    std::shared_ptr<Aggregator> aggregator;
    {
        std::lock_guard lock(mutex_);
        aggregator = std::move(aggregator_);
    }
    if (aggregator) {
        aggregator->wait_idle(false);  // a failed commit waiting to retry is replayed by the next leader
        aggregator->stop();
    }
    if (task_id_.empty()) return;  // never started
    // Also when no aggregator runs: the renewal thread may hold the lease it took after the
    // leader let it go, before (or without) this process starting an aggregator.
    if (auto released = leases_.release_lease(claim_); !released)
        common::process_log().warning("lease", "releasing the lease " + claim_.name + ": " + released.message());
}

}  // namespace tessera::server
