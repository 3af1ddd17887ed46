// Validator: verdicts, the replica comparison and each volunteer's standing.
#include "validator.h"

#include <algorithm>
#include <map>
#include <sstream>

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "commitments_json.h"
#include "clock.h"
#include "logger.h"
#include "rejection_reasons.h"
#include "replica_comparison.h"
#include "replica_quorum.h"
#include "replay_audit.h"
#include "tensor_math.h"
#include "trust.h"
#include "twin_moments.h"

namespace tessera::server {
namespace {

// The task's concurrency now: the volunteers issued one of its units recently, at least 1.
common::Result<std::int64_t> concurrency_now(Store& store, const std::string& task_id, std::int64_t now) {
    auto volunteers = store.task_volunteers(task_id, now - kVolunteerActiveWindowS);
    if (!volunteers) return volunteers.error();
    return std::max<std::int64_t>(1, *volunteers);
}

// `known` when the caller had the record, else the record `read` gives, kept in `holder`
// (null when there is none).
template <class Record, class Read>
common::Result<const Record*> known_or_read(const Record* known, std::optional<Record>& holder, Read read) {
    if (known) return known;
    auto found = read();
    if (!found) return found.error();
    holder = std::move(*found);
    return holder ? &*holder : nullptr;
}

}  // namespace

Validator::Validator(Store& store, ResultFiles& results, ModelCache& models, ProbePools& probes, BlobStore& blobs,
                     CopyDetector& copies, CheckCosts& costs, Clock clock, Doorbell& accepted, std::uint64_t seed)
    : store_(store), results_(results), models_(models), blobs_(blobs), copies_(copies),
      checks_(store, store, results, models, probes, blobs, copies, costs), clock_(std::move(clock)),
      guard_(store, store, store, clock_), accepted_(accepted), rng_(seed) {}

double Validator::credit_for(const TaskConfig& config, std::int64_t local_steps) {
    return static_cast<double>(local_steps * config.batch_size) / 1000.0;
}

bool Validator::draw(double chance) {
    if (chance >= 1) return true;
    std::lock_guard lock(mutex_);
    return std::uniform_real_distribution<double>(0, 1)(rng_) < chance;
}

common::Status Validator::validate(const std::string& assignment_id, const common::LossReport* answered) {
    auto found = store_.result_context(assignment_id, clock_() - kVolunteerActiveWindowS,
                                       std::string(StallGuard::kSettingPrefix));
    if (!found) return found.error();
    if (!*found) return common::make_error("no result '" + assignment_id + "'");
    auto& context = **found;
    const auto& a = context.assignment;
    if (a.state != AssignmentState::Returned) return {};  // already settled
    auto task = configs_.view(std::move(context.task));
    if (!task) return task.error();
    const auto& unit = context.unit;
    if (unit.state == WorkUnitState::Retired)
        return reject(a, *task, reason::kWorkUnitRetired, "the work unit failed too often and was retired");
    if (!unit.checks.empty()) return settle_check_answer(a, *task, unit);
    const auto concurrency = std::max<std::int64_t>(1, context.task_volunteers);
    if (auto stale = too_stale(a, *task, concurrency); !stale.empty())
        return reject(a, *task, reason::kTooStale, stale);
    auto sent = sent_work_unit(a);
    if (!sent) return sent.error();
    if (!context.client) return common::make_error("no client '" + a.client_id + "'");

    // The guard's settings are read (and re-armed) only when the task has some.
    std::set<std::string> suspended;
    if (context.settings_of_task > 0) {
        auto read = guard_.suspended(*task);
        if (!read) return read.error();
        suspended = std::move(*read);
    }
    const auto asked = audit_asked(a);
    auto waiting = waits_for_moments(a, asked);
    if (!waiting || *waiting) return waiting ? common::Status() : common::Status(waiting.error());
    bool checked_by_server = false;
    auto held = waits_for_check(a, answered != nullptr, checked_by_server);
    if (!held || *held) return held ? common::Status() : common::Status(held.error());
    auto plan = plan_checks(a, task->config, context);
    plan.check_by_volunteers = plan.check_by_volunteers && !checked_by_server;
    plan.answered = answered;
    const bool warm_up = plan.warm_up;
    auto verdict = checks_.run(a, *task, *sent, plan, suspended);
    if (!verdict) return verdict.error();
    auto note_direction = [&] {
        copies_.note_result(a.task_id, a.work_unit_id, std::move(verdict->sketch),
                            {a.base_version, a.returned_at.value_or(clock_())}, warm_up);
    };
    if (verdict->wants_moments && is_statistical(verdict->reason)) return ask_for_moments(a, *verdict);
    if (verdict->wants_check) return ask_for_check(a, *task, unit);
    if (!verdict->reason.empty()) {
        // Refused for its direction alone, a result still says where the model descends now: it
        // joins the consensus, so that one formed before the model turned gives way to the
        // results that agree with each other now (the majority's direction).
        if (verdict->reason == reason::kMisaligned) note_direction();
        return reject(a, *task, verdict->reason, verdict->detail, verdict->figures);
    }
    note_direction();
    return settle_passed(a, *task, context, *verdict, {asked, concurrency});
}

common::Status Validator::settle_passed(const AssignmentRecord& a, const TaskView& task, const ResultContext& context,
                                        Verdict& verdict, std::pair<std::string, std::int64_t> asked_and_concurrency) {
    const auto& unit = context.unit;
    const auto& [asked, concurrency] = asked_and_concurrency;
    if (verdict.audited) carry_held_flag(a, verdict);
    if (auto status = note_passed(a, verdict); !status) return status;
    // A result the server replayed for a flag needs no twin.
    const bool twin_from_moments = twinned_from_moments(a, task.config, unit, results_);
    bool refused = false;
    auto twin = !verdict.audited && unit.replicas == 1 && (asked == "twin" || twin_from_moments)
                    ? twin_drawn(a, task, twin_from_moments, refused)
                    : common::Result<bool>(false);
    if (!twin || refused) return twin ? common::Status() : common::Status(twin.error());
    if (*twin || unit.replicas > 1) return settle_replicas(a, task, verdict.figures);
    auto accepted = accept(a, task, verdict.figures, true, {&*context.client, &unit, concurrency});
    return accepted ? common::Status() : common::Status(accepted.error());
}

void Validator::carry_held_flag(const AssignmentRecord& a, Verdict& verdict) {
    auto held = held_flag(a);
    if (held.flagged.empty()) return;
    if (verdict.overruled.empty()) verdict.overruled = held.flagged;
    if (!verdict.figures.gain_per_step) verdict.figures.gain_per_step = held.gain_per_step;
    if (!verdict.figures.full_rate_steps) verdict.figures.full_rate_steps = held.full_rate_steps;
}

common::Result<bool> Validator::twin_drawn(const AssignmentRecord& a, const TaskView& task, bool from_moments,
                                           bool& refused) {
    if (!from_moments) return make_audit_twin(a);
    auto commitments = commitments_of(a.id);
    if (!commitments) return commitments.error();
    std::string refusal;
    auto published = publish_twin_moments(a, *commitments ? &**commitments : nullptr, results_, blobs_, refusal);
    if (!published) return published.error();
    if (refusal.empty()) return make_audit_twin(a, *published);
    refused = true;
    auto status = reject(a, task, reason::kAuditFailed, refusal);
    return status ? common::Result<bool>(false) : common::Result<bool>(status.error());
}

common::Result<bool> Validator::waits_for_moments(const AssignmentRecord& a, const std::string& asked) {
    if (asked != "moments" || results_.has_moments(a.id) || !a.metrics_json) return false;
    auto until = moments_asked_at(a) + kMomentsWaitS;
    if (clock_() >= until) return false;  // withheld: the audit refuses it
    auto held = store_.hold_result(a.id, *a.metrics_json, until);
    if (!held) return held.error();
    return true;
}

common::Status Validator::ask_for_moments(const AssignmentRecord& a, const Verdict& verdict) {
    auto now = clock_();
    auto flagged = verdict.reason + ": " + verdict.detail;
    auto held = store_.hold_result(a.id, metrics_asking_moments(a, flagged, verdict.figures, now), now + kMomentsWaitS);
    if (!held) return held.error();
    if (!*held) return {};  // settled meanwhile
    boost::json::object detail{{"assignment_id", a.id}, {"client_id", a.client_id}, {"flagged", flagged}};
    return store_.add_event("moments_asked", boost::json::serialize(detail), now);
}

CheckPlan Validator::plan_checks(const AssignmentRecord& a, const TaskConfig& config, const ResultContext& context) {
    CheckPlan plan;
    plan.loss_check = draw(loss_check_chance(config, *context.client));
    // Drawn at its upload (result_intake.h); an audit twin is computed by a volunteer instead,
    // also of a drawn kept result in a task audited by volunteers, once its moments came.
    const auto asked = audit_asked(a);
    plan.audit = !asked.empty() && asked != "twin" && !twinned_from_moments(a, config, context.unit, results_);
    // A volunteer's first result of a task whose units are sized to speeds is its warm-up unit
    // (docs/operations.md, "Alignment"): compared for copies, it forms and is judged by the
    // warm-up units' consensus, not the others'.
    plan.warm_up = config.target_seconds > 0 && !context.returned_before;
    // A quarantined volunteer's flags are refused as they stand: no replay for each upload.
    plan.audit_flags = config.audit > 0 && !context.client->quarantined;
    // Held for a loss-check unit, a result is loss-checked whatever this validation's draw says.
    plan.loss_check = plan.loss_check || check_wait_end(a).has_value();
    plan.check_by_volunteers = checks_by_volunteers(config);
    return plan;
}

std::string Validator::too_stale(const AssignmentRecord& a, const TaskView& task, std::int64_t concurrency) {
    if (!staleness_limit(task.config.merge, 1)) return std::string();
    const auto limit = *staleness_limit(task.config.merge, concurrency);
    const auto tau = task.record.version - a.base_version;
    if (static_cast<double>(tau) <= limit) return std::string();
    std::ostringstream detail;
    detail << "τ = " << tau << " versions, beyond the " << limit << " the task merges with " << concurrency
           << " volunteer(s) active (staleness " << task.config.merge.staleness.to_string() << ")";
    return detail.str();
}

common::Status Validator::note_passed(const AssignmentRecord& a, const Verdict& verdict) {
    if (verdict.audited)
        if (auto status = note_audit_passed(a, verdict.overruled); !status) return status;
    if (verdict.flagged)
        if (auto status = note_flagged(a, verdict); !status) return status;
    if (!verdict.waived.empty())
        if (auto status = note_waived(a, verdict); !status) return status;
    return {};
}

common::Status Validator::note_audit_passed(const AssignmentRecord& a, const std::string& overruled) {
    // The span a later failed audit withdraws credit for starts after it.
    boost::json::object detail{{"assignment_id", a.id}, {"client_id", a.client_id}};
    if (!overruled.empty()) detail["flagged"] = overruled;
    return store_.add_event("audit_passed", boost::json::serialize(detail), clock_());
}

common::Status Validator::note_flagged(const AssignmentRecord& a, const Verdict& verdict) {
    boost::json::object detail{{"assignment_id", a.id},
                               {"client_id", a.client_id},
                               {"gain_per_step", verdict.figures.gain_per_step.value_or(0)},
                               {"held_out_gain", verdict.held_out_gain}};
    return store_.add_event("result_flagged", boost::json::serialize(detail), clock_());
}

common::Status Validator::note_waived(const AssignmentRecord& a, const Verdict& verdict) {
    boost::json::array waived;
    for (const auto& note : verdict.waived) waived.emplace_back(note);
    boost::json::object detail{{"assignment_id", a.id}, {"client_id", a.client_id}, {"waived", std::move(waived)}};
    return store_.add_event("check_waived", boost::json::serialize(detail), clock_());
}

common::Result<bool> Validator::accept(const AssignmentRecord& a, const TaskView& task, const CheckFigures& figures,
                                       bool merge, ResultReadings known) {
    std::optional<ClientRecord> read_client;
    auto client = known_or_read(known.client, read_client, [&] { return store_.client(a.client_id); });
    if (!client) return client.error();
    known.client = *client;
    bool quarantined = known.client && known.client->quarantined;
    bool fallback = false;  // merged although quarantined: nothing else has been for a while
    if (merge && quarantined) {
        auto starved = guard_.starved(task);
        if (!starved) return starved.error();
        fallback = *starved;
    }
    merge = merge && (!quarantined || fallback);
    std::optional<WorkUnitRecord> read_unit;
    auto unit = known_or_read(known.unit, read_unit, [&] { return store_.work_unit(a.work_unit_id); });
    if (!unit) return unit.error();
    known.unit = *unit;
    std::int64_t steps = known.unit ? known.unit->local_steps : task.config.local_steps;
    // A confirming twin earns credit as the merged one does; a quarantined volunteer none.
    double credit = quarantined ? 0.0 : credit_for(task.config, steps);
    auto concurrency = known.concurrency ? common::Result<std::int64_t>(*known.concurrency)
                                         : concurrency_now(store_, a.task_id, clock_());
    if (!concurrency) return concurrency.error();
    auto accepted = store_.accept(a, figures, credit, merge, clock_(), *concurrency);
    if (!accepted) return accepted.error();
    if (!*accepted) return false;
    if (fallback) {
        boost::json::object event{{"assignment_id", a.id}, {"client_id", a.client_id}, {"task_id", a.task_id}};
        if (auto status = store_.add_event("quarantine_fallback", boost::json::serialize(event), clock_()); !status)
            return status.error();
    }
    if (merge)
        accepted_.ring();
    else
        results_.remove(a.id);
    if (quarantined && known.client->valid_streak + 1 >= task.config.trust_streak) {
        auto released = store_.set_client_quarantined(
            a.client_id, false, std::to_string(task.config.trust_streak) + " valid results in a row", clock_());
        if (!released) return released.error();
    }
    return merge;
}

common::Status Validator::reject(const AssignmentRecord& a, const TaskView& task, std::string_view why,
                                 const std::string& detail, const CheckFigures& figures) {
    auto rejected = store_.reject(a.id, std::string(why), detail, clock_(), task.config.max_failures, figures);
    if (!rejected) return rejected.error();
    results_.remove(a.id);
    if (!*rejected) return {};
    auto suspended = guard_.note_refusal(task, why);
    if (!suspended) return suspended.error();
    // A stale consensus is what stalls the alignment check: the next one forms from new results.
    if (*suspended && why == reason::kMisaligned) copies_.restart_consensus(a.task_id, clock_());
    const auto& c = task.config;
    // A failed replay audit is no statistical verdict: it quarantines at once, and the credit of
    // the volunteer's results since its last clean audit is withdrawn (the event lists them).
    std::string why_quarantined;
    if (why == reason::kAuditFailed || why == reason::kCheckMismatch) {
        boost::json::object failed{{"assignment_id", a.id}, {"client_id", a.client_id}, {"detail", detail}};
        if (auto status = store_.add_event("audit_failed", boost::json::serialize(failed), clock_()); !status)
            return status;
        why_quarantined = "a replay audit of " + a.id + " failed";
        auto since = store_.since_clean_audit(a.client_id);
        if (!since) return since.error();
        auto withdrawn = store_.withdraw_credit_since(a.client_id, *since, why_quarantined, clock_());
        if (!withdrawn) return withdrawn.error();
    } else {
        auto recent = store_.rejections_since(a.client_id, clock_() - c.quarantine_window_s);
        if (!recent) return recent.error();
        if (*recent < c.quarantine_rejections) return {};
        why_quarantined =
            std::to_string(*recent) + " results refused within " + std::to_string(c.quarantine_window_s) + " s";
    }
    auto quarantined = store_.set_client_quarantined(a.client_id, true, why_quarantined, clock_());
    return quarantined ? common::Status() : common::Status(quarantined.error());
}

}  // namespace tessera::server
