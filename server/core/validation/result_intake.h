// Receiving a result upload: the cheap checks (manifest, assignment, deadline, base version,
// encoding, size, hash), the replay-audit draw, then the delta is written to disk and its row
// committed — only then is the upload acknowledged — and the validation stage takes over (the
// row is stored under this process's claim and handed to it), or, when its audit needs the kept
// moments its unit started from, once the volunteer has sent them (receive_moments). Refusals that concern the
// volunteer's own assignment are stored as rejections. Thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "bytes.h"
#include "clock.h"
#include "delta_caps.h"
#include "protocol.h"
#include "result_files.h"
#include "store.h"
#include "task_config.h"
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
    // Stored, and drawn for a replay audit that needs the kept moments its unit started from:
    // validated once they come (receive_moments), refused after kMomentsWaitS without them.
    bool moments_wanted = false;
};

// Whether a result is drawn for a replay audit: its volunteer's chance under its task's
// settings (trust.h, audit_chance). An error is the server's.
using AuditDraw = std::function<common::Result<bool>(const AssignmentRecord&, const TaskConfig&)>;

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
    // The moments a unit started from, asked for by its upload's answer (docs/protocol.md,
    // "Moments for an audit"): `ref_json` names the unit, `moments` is the optimizer-state file.
    common::Result<IntakeOutcome> receive_moments(const std::string& client_id, std::string_view ref_json,
                                                  const ReceivedDelta& moments);
    // Whether a returned result's audit asked for the moments its unit started from, at its
    // upload or for a flag, and they have not come.
    bool moments_wanted(const AssignmentRecord& assignment) const;
    // Set before results come: without it no result is audited.
    void set_audit_draw(AuditDraw draw) { audit_draw_ = std::move(draw); }

private:
    common::Result<IntakeOutcome> refuse(const AssignmentRecord& assignment, std::string_view reason,
                                         const std::string& detail);
    // Whether the assignment's task draws replay audits (and so needs every result's commitments).
    common::Result<bool> audited_task(const AssignmentRecord& assignment) const;
    // A result that passed the upload's checks: its audit drawn, its delta and row stored, and
    // handed to validation unless its audit waits for moments.
    common::Result<IntakeOutcome> store(const AssignmentRecord& assignment, const common::ResultManifest& manifest,
                                        const common::WorkUnit& unit, const ReceivedDelta& delta, std::int64_t now);
    // What the audit draw says of a result: "" none, "replay", or "moments" (replay_audit.h).
    common::Result<std::string> draw_audit(const AssignmentRecord& assignment, const common::ResultManifest& manifest,
                                           const common::WorkUnit& unit);
    TaskStore& tasks_;
    WorkStore& work_;
    ResultStore& results_;
    ResultFiles& files_;
    const DeltaCaps& delta_caps_;
    Clock clock_;
    ValidationStage& validation_;
    AuditDraw audit_draw_;
};

}  // namespace tessera::server
