// What a volunteer's two main requests do, with no transport: ask for work, and hand in a
// result. The HTTP API calls it once a request's signature has been checked (request_auth.h);
// the fleet simulator's in-process server calls it directly, so that the two share every step
// from the request to the merge and only the transport differs. Thread-safe.
#pragma once

#include <string>

#include "clock.h"
#include "protocol.h"
#include "result_intake.h"
#include "scheduler.h"
#include "store.h"
#include "upload_spool.h"

namespace tessera::server {

// A work request's answer: the units (http_status 200), or why not (the status, a
// machine-readable code and a message for the volunteer).
struct WorkAnswer {
    int http_status = 200;
    std::string error;
    std::string message;
    common::WorkResponse response;
};

class VolunteerService {
public:
    VolunteerService(ClientStore& clients, Scheduler& scheduler, ResultIntake& intake, Clock clock)
        : clients_(clients), scheduler_(scheduler), intake_(intake), clock_(std::move(clock)) {}

    // POST /api/v1/work signed by `client`: the volunteer noted as seen (its device and speed),
    // then the scheduler's units. An error is the server's.
    common::Result<WorkAnswer> request_work(const ClientRecord& client, const common::WorkRequest& request);
    // POST /api/v1/results signed by `client_id`, its body spooled: refused when its framing
    // (400) or the disk (an error) failed, else taken by the intake, the spool file moved into
    // place as the result's delta.
    common::Result<IntakeOutcome> upload(const std::string& client_id, SpooledUpload& upload);
    // POST /api/v1/results/moments, spooled and framed alike: the moments a unit started from,
    // for its audit, moved into place beside its delta.
    common::Result<IntakeOutcome> upload_moments(const std::string& client_id, SpooledUpload& upload);
    // Whether a result's audit waits for the moments its unit started from (its status says so).
    bool moments_wanted(const AssignmentRecord& assignment) const { return intake_.moments_wanted(assignment); }

private:
    ClientStore& clients_;
    Scheduler& scheduler_;
    ResultIntake& intake_;
    Clock clock_;
};

}  // namespace tessera::server
