// Scheduler: a built unit sealed and claimed, and loss-check units (docs/operations.md,
// "Loss-check units"), built from the unit the checked result answered as it was sent, so that
// the checker evaluates what its volunteer trained: the same base model, shards and
// hyperparameters.
#include <boost/json.hpp>

#include "assignment_unit.h"
#include "json_strict.h"
#include "scheduler.h"
#include "signed_envelope.h"

namespace tessera::server {
namespace {

// A check is a few hundred forward passes: its volunteer has at most this long, so that the
// result it holds waits no longer than a missed check costs (the server then checks it itself).
constexpr std::int64_t kCheckDeadlineS = 600;

}  // namespace

common::Result<std::optional<common::WorkResponse>> Scheduler::seal_and_claim(const common::WorkUnit& wu,
                                                                              const WorkUnitRecord& unit, bool new_unit,
                                                                              std::optional<std::int64_t> rebase,
                                                                              std::int64_t max_in_flight) {
    auto envelope = common::seal_envelope(boost::json::serialize(common::to_json(wu)), common::kWorkUnitPurpose, key_);
    AssignmentRecord assignment;
    assignment.id = wu.wu_id;
    assignment.work_unit_id = unit.id;
    assignment.client_id = wu.client_id;
    assignment.issued_at = wu.issued_at;
    assignment.deadline = wu.deadline;
    assignment.envelope_json = boost::json::serialize(common::envelope_to_json(envelope));
    auto claim = new_unit ? work_.create_work_unit(unit, assignment, max_in_flight)
                          : work_.add_assignment(assignment, rebase, max_in_flight);
    if (!claim) return claim.error();
    if (*claim == Store::Claim::Taken) return std::optional<common::WorkResponse>();  // another request won it
    common::WorkResponse response;
    if (*claim == Store::Claim::Busy) {
        response.retry_after_s = kRetryBusyS;
        return std::optional(std::move(response));
    }
    response.has_work = true;
    response.work_unit = std::move(envelope);
    return std::optional(std::move(response));
}

common::Result<std::optional<common::WorkResponse>> Scheduler::issue_check(const DrawnTask& drawn,
                                                                           const ClientRecord& client,
                                                                           const WorkUnitRecord& unit,
                                                                           std::int64_t max_in_flight) {
    const auto& task = drawn.task;
    // A unit that can no longer be built (its result or base gone) is retired: the validator
    // checks that result itself once its wait ends.
    auto give_up = [&]() -> common::Result<std::optional<common::WorkResponse>> {
        if (auto status = work_.retire_open_unit(unit.id); !status) return status.error();
        return std::optional<common::WorkResponse>();
    };
    auto checked = work_.assignment(unit.checks);
    if (!checked) return checked.error();
    if (!*checked) return give_up();
    auto sent = sent_work_unit(**checked);
    if (!sent) return common::with_context("the unit that loss-check unit " + unit.id + " checks", sent.error());
    auto spec = common::parse_json_strict(unit.check_spec);
    auto check = spec ? common::loss_check_from_json(*spec) : common::Result<common::LossCheck>(spec.error());
    if (!check) return common::with_context("loss-check unit " + unit.id, check.error());
    auto published = published_.ensure_blob(sent->model_blob.sha256);
    if (!published) return published.error();
    if (!*published) return give_up();

    auto now = clock_();
    common::WorkUnit wu = std::move(*sent);
    wu.wu_id = random_id("a-");
    wu.client_id = client.id;
    wu.patch_from.clear();
    wu.patches.clear();
    wu.moments.reset();
    wu.check = std::move(*check);
    wu.blob_base_url = blob_base_url_;
    wu.issued_at = now;
    wu.deadline = now + std::min(task.config.deadline_s, kCheckDeadlineS);

    return seal_and_claim(wu, unit, false, std::nullopt, max_in_flight);
}

}  // namespace tessera::server
