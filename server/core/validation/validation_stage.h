// The validation stage: the one way a stored result reaches the validator, whether one server
// process runs or several on one database. It owns the move out of `returned`, and a result is
// validated only by the process that holds its claim (assignments.claimed_by, until
// claimed_until). The intake stores each result already claimed by this process (claim_now())
// and hands it over at once (stored()); every poll claims the returned results nobody holds:
// those whose claim lapsed — their validation failed with an error, or their process stopped
// answering — and, at start, those of this host's processes that are gone. So two processes
// never validate one result, none is left without a validator, and no other component
// resubmits results. A graceful stop gives up the claims of results it did not validate.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <map>
#include <string>
#include <thread>

#include "clock.h"
#include "executor.h"
#include "store.h"
#include "validator.h"

namespace tessera::server {

struct ValidationStageSettings {
    std::string holder;                        // this process (process_holder.h)
    std::int64_t claim_s = kValidationClaimS;  // a claim lapses this long after it was taken
    std::chrono::milliseconds poll{1000};      // zero: no polling thread (poll() is called by hand)
    std::size_t batch = 64;                    // results waiting here at most before a poll claims more
};

class ValidationStage {
public:
    ValidationStage(ResultStore& store, Validator& validator, Executor executor, Clock clock,
                    ValidationStageSettings settings);
    ~ValidationStage();

    // The claim a result is stored with: this process's, for claim_s from now.
    ResultClaim claim_now() const;
    // A result this process stored under its claim: validated on the executor.
    void stored(const std::string& assignment_id);
    // Takes the claims of this host's processes that are gone, claims what nobody holds, and
    // polls from then on (every `poll`; none when it is zero).
    common::Status start();
    // Claims the returned results nobody holds (room permitting) and queues them. Returns how
    // many it claimed.
    common::Result<std::size_t> poll();
    // Stops polling; validations already queued still run on the executor.
    void stop();
    // Gives up this process's claims on results not validated (after the executor stopped).
    common::Status release();

private:
    common::Result<std::size_t> claim(const std::vector<std::string>& released);
    void validate_later(const std::string& assignment_id, std::int64_t claimed_until);
    void validate_if_held(const std::string& assignment_id, std::int64_t claimed_until);
    void poll_loop();

    ResultStore& store_;
    Validator& validator_;
    Executor executor_;
    Clock clock_;
    ValidationStageSettings settings_;

    std::mutex mutex_;
    std::condition_variable changed_;
    std::map<std::string, std::int64_t> in_flight_;  // queued or being validated here: id → claim's end
    bool stopping_ = false;
    std::thread poller_;
};

}  // namespace tessera::server
