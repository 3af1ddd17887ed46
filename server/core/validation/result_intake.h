// Receiving a result upload: the cheap checks (manifest, assignment, deadline, base version,
// encoding, size, hash), then the delta is written to disk and its row committed — only then
// is the upload acknowledged — and the validation stage takes over (the row is stored under
// this process's claim and handed to it). Refusals that concern the
// volunteer's own assignment are stored as rejections. Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "bytes.h"
#include "clock.h"
#include "delta_caps.h"
#include "result_files.h"
#include "store.h"
#include "validation_stage.h"

namespace tessera::server {

// An upload's delta as the intake needs it: its size and SHA-256 (computed once, where it was
// read), and how to store it under an assignment's id — written from memory, or a spooled file
// moved into place.
struct ReceivedDelta {
    std::uint64_t bytes = 0;
    std::string sha256;
    std::function<common::Status(ResultFiles&, const std::string& assignment_id)> store;
};

struct IntakeOutcome {
    int http_status = 200;
    std::string error;    // machine-readable code; empty when accepted for validation
    std::string message;  // for the volunteer
};

class ResultIntake {
public:
    // The tasks' settings, the assignments uploaded to, the results it stores (their files in
    // `files`). A delta larger than its task's cap in `delta_caps` is refused (`too_large`).
    ResultIntake(TaskStore& tasks, WorkStore& work, ResultStore& results, ResultFiles& files,
                 const DeltaCaps& delta_caps, Clock clock, ValidationStage& validation)
        : tasks_(tasks), work_(work), results_(results), files_(files), delta_caps_(delta_caps),
          clock_(std::move(clock)), validation_(validation) {}
    // An upload split into its manifest and its delta (docs/protocol.md, "Uploading a result").
    common::Result<IntakeOutcome> receive(const std::string& client_id, std::string_view manifest_json,
                                          const ReceivedDelta& delta);

private:
    common::Result<IntakeOutcome> refuse(const AssignmentRecord& assignment, std::string_view reason,
                                         const std::string& detail);
    TaskStore& tasks_;
    WorkStore& work_;
    ResultStore& results_;
    ResultFiles& files_;
    const DeltaCaps& delta_caps_;
    Clock clock_;
    ValidationStage& validation_;
};

}  // namespace tessera::server
