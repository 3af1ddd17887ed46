// ResultIntake: the synchronous half of result handling.
#include "result_intake.h"

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "protocol.h"
#include "rejection_reasons.h"
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

    if (auto status = delta.store(files_, a.id); !status) return status.error();
    auto json = common::to_json(*manifest);
    auto metrics_json = json.at("metrics").as_object();
    metrics_json["device"] = manifest->device;  // the commitments' opening loss is judged by it
    auto metrics = boost::json::serialize(metrics_json);
    std::string commitments;
    if (manifest->commitments) commitments = boost::json::serialize(json.at("commitments"));
    auto recorded = results_.record_return(a.id, delta.sha256, manifest->delta_blob.bytes, metrics, now,
                                           validation_.claim_now(), commitments);
    if (!recorded || !*recorded) {
        files_.remove(a.id);
        if (!recorded) return recorded.error();
        return outcome(409, "conflict", "work unit " + a.id + " changed state while uploading");
    }
    validation_.stored(a.id);
    return outcome(200, "", "stored; validation follows");
}

}  // namespace tessera::server
