// ValidationStage: claims, the poll thread and the queue of validations in flight.
#include "validation_stage.h"

#include "clock.h"
#include "executor.h"
#include "logger.h"
#include "process_holder.h"
#include "worker_guard.h"

namespace tessera::server {

ValidationStage::ValidationStage(ResultStore& store, Validator& validator, Executor executor, Clock clock,
                                 ValidationStageSettings settings)
    : store_(store), validator_(validator), executor_(std::move(executor)), clock_(std::move(clock)),
      settings_(std::move(settings)) {}

ValidationStage::~ValidationStage() { stop(); }

ResultClaim ValidationStage::claim_now() const { return {settings_.holder, clock_() + settings_.claim_s}; }

void ValidationStage::stored(const std::string& assignment_id) {
    validate_later(assignment_id, clock_() + settings_.claim_s);
}

common::Status ValidationStage::start() {
    auto holders = store_.result_claim_holders();
    if (!holders) return holders.error();
    std::vector<std::string> gone;
    for (const auto& holder : *holders)
        if (holder != settings_.holder && holder_gone(holder)) gone.push_back(holder);
    if (auto claimed = claim(gone); !claimed) return claimed.error();
    if (settings_.poll.count() > 0) poller_ = std::thread([this] { poll_loop(); });
    return {};
}

common::Result<std::size_t> ValidationStage::poll() { return claim({}); }

common::Result<std::size_t> ValidationStage::claim(const std::vector<std::string>& released) {
    std::size_t room = 0;
    {
        std::lock_guard lock(mutex_);
        room = in_flight_.size() < settings_.batch ? settings_.batch - in_flight_.size() : 0;
    }
    if (room == 0) return std::size_t{0};
    auto claim = claim_now();
    auto ids = store_.claim_returned(claim, clock_(), room, released);
    if (!ids) return ids.error();
    for (const auto& id : *ids) validate_later(id, claim.until);
    return ids->size();
}

void ValidationStage::validate_later(const std::string& assignment_id, std::int64_t claimed_until) {
    {
        std::lock_guard lock(mutex_);
        if (!in_flight_.emplace(assignment_id, claimed_until).second) return;
    }
    executor_([this, assignment_id, claimed_until] {
        common::run_guarded("validation", [&] { validate_if_held(assignment_id, claimed_until); });
        std::lock_guard lock(mutex_);
        in_flight_.erase(assignment_id);
    });
}

// A result may wait in the queue until its claim lapses: when less than half the claim is
// left, it is renewed before the validation begins, and a result another process took
// meanwhile is left to that process.
void ValidationStage::validate_if_held(const std::string& assignment_id, std::int64_t claimed_until) {
    if (claimed_until - clock_() < settings_.claim_s / 2) {
        auto renewed = store_.renew_result_claim(assignment_id, claim_now());
        if (!renewed) {
            common::process_log().error("validation",
                                        "renewing the claim on " + assignment_id + ": " + renewed.message() +
                                            " (validated once a claim is taken again)",
                                        {{"assignment_id", assignment_id}});
            return;
        }
        if (!*renewed) return;
    }
    if (auto status = validator_.validate(assignment_id); !status)
        common::process_log().error("validation",
                                    "validator: " + assignment_id + ": " + status.message() +
                                        " (validated again once its claim lapses, in " +
                                        std::to_string(settings_.claim_s) + " s at most)",
                                    {{"assignment_id", assignment_id}});
}

void ValidationStage::poll_loop() {
    std::unique_lock lock(mutex_);
    while (!changed_.wait_for(lock, settings_.poll, [&] { return stopping_; })) {
        lock.unlock();
        common::run_guarded("validation poller", [this] {
            if (auto claimed = poll(); !claimed)
                common::process_log().error("validation", "claiming results to validate: " + claimed.message());
        });
        lock.lock();
    }
}

void ValidationStage::stop() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    changed_.notify_all();
    if (poller_.joinable()) poller_.join();
}

common::Status ValidationStage::release() {
    auto released = store_.release_result_claims(settings_.holder);
    if (!released) return released.error();
    return {};
}

}  // namespace tessera::server
