// ResultIntake: the synchronous half of result handling.
#include "result_intake.h"

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "optimizer_moments.h"
#include "protocol.h"
#include "rejection_reasons.h"
#include "replay_audit.h"
#include "task_lookup.h"

namespace tessera::server {
namespace {

IntakeOutcome outcome(int status, std::string error, std::string message) {
    return {status, std::move(error), std::move(message)};
}

}  // namespace

common::Result<IntakeOutcome> ResultIntake::refuse(const AssignmentRecord& a, std::string_view why,
                                                   const std::string& detail) {
    auto task = load_task(tasks_, a.task_id);
    if (!task) return task.error();
    auto rejected = results_.reject(a.id, std::string(why), detail, clock_(), task->config.max_failures);
    if (!rejected) return rejected.error();
    return outcome(422, std::string(why), detail);
}

common::Result<IntakeOutcome> ResultIntake::receive(const std::string& client_id, std::string_view manifest_json,
                                                    const ReceivedDelta& delta) {
    auto manifest = common::parse_message<common::ResultManifest>(manifest_json);
    if (!manifest) return outcome(400, "bad_request", manifest.message());
    if (manifest->client_id != client_id)
        return outcome(403, "forbidden", "the manifest's client_id is not the signer");
    auto found = work_.assignment(manifest->wu_id);
    if (!found) return found.error();
    if (!*found) return outcome(404, "not_found", "no work unit '" + manifest->wu_id + "'");
    const auto& a = **found;
    if (a.client_id != client_id)
        return outcome(403, "forbidden", "work unit " + a.id + " is assigned to another volunteer");
    if (a.state != AssignmentState::InProgress)
        return outcome(
            409, "conflict",
            "work unit " + a.id + " is " + std::string(assignment_state_name(a.state)) + ", not in progress");
    auto now = clock_();
    if (now > a.deadline)
        return refuse(a, reason::kDeadlinePassed,
                      "received " + std::to_string(now - a.deadline) + " s after the deadline");
    if (manifest->base_version != a.base_version)
        return refuse(a, reason::kWrongBaseVersion,
                      "the result names base version " + std::to_string(manifest->base_version) + ", the work unit " +
                          std::to_string(a.base_version));
    auto unit = sent_work_unit(a);
    if (!unit) return unit.error();
    const auto& encoding = unit->encoding;
    if (manifest->encoding.dtype != encoding.dtype || manifest->encoding.topk_fraction != encoding.topk_fraction)
        return refuse(a, reason::kEncodingMismatch, "the delta is not encoded as the work unit asked");
    auto size = static_cast<std::int64_t>(delta.bytes);
    if (auto cap = delta_caps_.of(a.task_id); size > cap)
        return refuse(a, reason::kTooLarge,
                      std::to_string(size) + " bytes exceed the task's cap of " + std::to_string(cap));
    if (size != manifest->delta_blob.bytes || delta.sha256 != manifest->delta_blob.sha256)
        return refuse(a, reason::kHashMismatch, "the delta's size or SHA-256 differs from the manifest's");
    // Without commitments, or without the moments they started from, no replay could judge it.
    if (!unit->check && (!manifest->commitments || !manifest->commitments->moments_in)) {
        auto audited = audited_task(a);
        if (!audited) return audited.error();
        if (*audited)
            return refuse(a, reason::kCommitmentsMissing,
                          "this task audits its results: a result must carry its commitments, moments_in "
                          "included (docs/protocol.md, \"Commitments\"), as tessera-client makes them");
    }
    return store(a, *manifest, *unit, delta, now);
}

common::Result<bool> ResultIntake::audited_task(const AssignmentRecord& a) const {
    auto task = load_task(tasks_, a.task_id);
    if (!task) return task.error();
    return task->config.audit > 0;
}

common::Result<IntakeOutcome> ResultIntake::store(const AssignmentRecord& a, const common::ResultManifest& manifest,
                                                  const common::WorkUnit& unit, const ReceivedDelta& delta,
                                                  std::int64_t now) {
    auto audit = draw_audit(a, manifest, unit);
    if (!audit) return audit.error();
    if (auto status = delta.store(files_, a.id); !status) return status.error();
    auto json = common::to_json(manifest);
    auto metrics_json = json.at("metrics").as_object();
    metrics_json["device"] = manifest.device;  // the commitments' opening loss is judged by it
    if (!audit->empty()) metrics_json["audit"] = *audit;
    auto metrics = boost::json::serialize(metrics_json);
    std::string commitments;
    if (manifest.commitments) commitments = boost::json::serialize(json.at("commitments"));
    // A result waiting for its moments is held by this process's claim while it waits.
    const bool moments_wanted = *audit == "moments";
    auto claim = validation_.claim_now();
    if (moments_wanted) claim.until = now + kMomentsWaitS;
    auto recorded =
        results_.record_return(a.id, delta.sha256, manifest.delta_blob.bytes, metrics, now, claim, commitments);
    if (!recorded || !*recorded) {
        files_.remove(a.id);
        if (!recorded) return recorded.error();
        return outcome(409, "conflict", "work unit " + a.id + " changed state while uploading");
    }
    if (moments_wanted) {
        auto answer = outcome(200, "",
                              "stored; its replay audit needs the moments its unit started from: post them "
                              "to /api/v1/results/moments within " +
                                  std::to_string(kMomentsWaitS) + " s");
        answer.moments_wanted = true;
        return answer;
    }
    validation_.stored(a.id);
    return outcome(200, "", "stored; validation follows");
}

common::Result<std::string> ResultIntake::draw_audit(const AssignmentRecord& a, const common::ResultManifest& manifest,
                                                     const common::WorkUnit& unit) {
    if (!audit_draw_) return std::string();
    // An audit twin of a kept unit is the audit of the unit it repeats (twin_moments.h).
    if (unit.moments) return std::string();
    auto task = load_task(tasks_, a.task_id);
    if (!task) return task.error();
    auto drawn = audit_draw_(a, task->config);
    if (!drawn) return drawn.error();
    if (!*drawn) return std::string();
    // Resumed kept moments: the server must be given them to replay the unit.
    const auto& moments = manifest.commitments ? manifest.commitments->moments_in : std::nullopt;
    bool resumed = moments && !moments->sha256.empty() && unit.hyper.optimizer == common::InnerOptimizer::Kept;
    if (resumed) return std::string("moments");
    // A unit sent with fresh moments a trusted volunteer can compute again exactly as it was
    // (docs/operations.md, "Audit twins"); a kept one clips its updates, and a twin, sent fresh
    // so as not to touch its volunteer's own moments, would not: the server replays those.
    bool twin = task->config.audit_by == "volunteers" && manifest.commitments &&
                unit.hyper.optimizer == common::InnerOptimizer::Fresh;
    return std::string(twin ? "twin" : "replay");
}

bool ResultIntake::moments_wanted(const AssignmentRecord& a) const {
    return a.state == AssignmentState::Returned && audit_asked(a) == "moments" && !files_.has_moments(a.id);
}

common::Result<IntakeOutcome> ResultIntake::receive_moments(const std::string& client_id, std::string_view ref_json,
                                                            const ReceivedDelta& moments) {
    auto ref = common::parse_message<common::WorkUnitRef>(ref_json);
    if (!ref) return outcome(400, "bad_request", ref.message());
    if (ref->client_id != client_id) return outcome(403, "forbidden", "the body's client_id is not the signer");
    auto found = work_.assignment(ref->wu_id);
    if (!found) return found.error();
    if (!*found || (*found)->client_id != client_id)
        return outcome(404, "not_found", "no work unit '" + ref->wu_id + "' for you");
    const auto& a = **found;
    if (a.state != AssignmentState::Returned || audit_asked(a) != "moments")
        return outcome(409, "conflict", "no moments were asked for work unit " + a.id);
    if (files_.has_moments(a.id)) return outcome(409, "conflict", "the moments of " + a.id + " came already");
    if (auto status = moments.store(files_, a.id); !status) return status.error();
    auto bytes = files_.read_moments(a.id);
    if (!bytes) return bytes.error();
    auto parsed = *bytes ? common::read_optimizer_moments(**bytes)
                         : common::Result<common::OptimizerMomentsFile>(common::make_error("they were not stored"));
    if (!parsed) {
        files_.remove_moments(a.id);
        return outcome(400, "bad_request", "not an optimizer-state file: " + parsed.message());
    }
    validation_.stored(a.id);
    return outcome(200, "", "moments stored; validation follows");
}

}  // namespace tessera::server
