// Validator: verdicts, the replica comparison and each volunteer's standing.
#include "validator.h"

#include <iostream>

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "rejection_reasons.h"
#include "replica_comparison.h"
#include "tensor_math.h"
#include "trust.h"

namespace tessera::server {

Validator::Validator(Store& store, ResultFiles& results, ModelCache& models, ProbePools& probes, const BlobStore& blobs,
                     CopyDetector& copies, CheckCosts& costs, Clock clock,
                     std::function<void(const std::string& task_id, const std::string& assignment_id)> on_accepted, std::uint64_t seed)
    : store_(store), results_(results), models_(models), copies_(copies),
      checks_(store, results, models, probes, blobs, copies, costs), clock_(std::move(clock)),
      on_accepted_(std::move(on_accepted)), rng_(seed) {}

double Validator::credit_for(const TaskConfig& config, std::int64_t local_steps) {
    return static_cast<double>(local_steps * config.batch_size) / 1000.0;
}

void Validator::submit(const std::string& assignment_id, const Executor& executor) {
    {
        std::lock_guard lock(mutex_);
        if (!in_flight_.insert(assignment_id).second) return;
    }
    executor([this, assignment_id] {
        if (auto status = validate(assignment_id); !status)
            std::cerr << "validator: " << assignment_id << ": " << status.message()
                      << " (validated again by the transitioner later)\n";
        std::lock_guard lock(mutex_);
        in_flight_.erase(assignment_id);
    });
}

bool Validator::draw(double chance) {
    if (chance >= 1) return true;
    std::lock_guard lock(mutex_);
    return std::uniform_real_distribution<double>(0, 1)(rng_) < chance;
}

common::Status Validator::validate(const std::string& assignment_id) {
    auto found = store_.assignment(assignment_id);
    if (!found) return found.error();
    if (!*found) return common::make_error("no result '" + assignment_id + "'");
    const auto& a = **found;
    if (a.state != AssignmentState::Returned) return {};  // already settled
    auto task = load_task(store_, a.task_id);
    if (!task) return task.error();
    auto unit = store_.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    if (*unit && (*unit)->state == WorkUnitState::Retired)
        return reject(a, *task, reason::kWorkUnitRetired, "the work unit failed too often and was retired");
    auto sent = sent_work_unit(a);
    if (!sent) return sent.error();
    auto client = store_.client(a.client_id);
    if (!client) return client.error();
    if (!*client) return common::make_error("no client '" + a.client_id + "'");

    auto verdict = checks_.run(a, *task, *sent, draw(loss_check_chance(task->config, **client)));
    if (!verdict) return verdict.error();
    if (!verdict->reason.empty())
        return reject(a, *task, verdict->reason, verdict->detail, verdict->figures.gain_per_step);
    copies_.note_result(a.task_id, a.work_unit_id, std::move(verdict->sketch));
    if (verdict->flagged)
        if (auto status = note_flagged(a, *verdict); !status) return status;
    if (*unit && (*unit)->replicas > 1) return settle_replicas(a, *task, verdict->figures);
    auto accepted = accept(a, *task, verdict->figures, true);
    return accepted ? common::Status() : common::Status(accepted.error());
}

common::Status Validator::note_flagged(const AssignmentRecord& a, const Verdict& verdict) {
    boost::json::object detail{{"assignment_id", a.id},
                               {"client_id", a.client_id},
                               {"gain_per_step", verdict.figures.gain_per_step.value_or(0)},
                               {"held_out_gain", verdict.held_out_gain}};
    return store_.add_event("result_flagged", boost::json::serialize(detail), clock_());
}

// A replicated unit: wait for the twin, then compare the two deltas.
common::Status Validator::settle_replicas(const AssignmentRecord& a, const TaskView& task,
                                          const CheckFigures& figures) {
    std::lock_guard lock(replica_mutex_);
    auto marked = store_.mark_validated(a.id, figures, clock_());
    if (!marked) return marked.error();
    auto siblings = store_.assignments_of(a.work_unit_id);
    if (!siblings) return siblings.error();
    const AssignmentRecord* twin = nullptr;
    for (const auto& s : *siblings)
        if (s.id != a.id && s.state == AssignmentState::Validated) twin = &s;
    if (!twin) return {};  // the twin validates later and settles both
    auto base = models_.get(a.task_id, a.base_version);
    if (!base) return base.error();
    auto mine = results_.read_decoded(a.id, value_count(**base) + 1);
    auto theirs = results_.read_decoded(twin->id, value_count(**base) + 1);
    if (!mine) return mine.error();
    if (!theirs) return theirs.error();
    auto compared = compare_replicas(*mine, *theirs, task.config.replica_tolerance);
    if (!compared) return compared.error();
    // The distance of every comparison, agreed or not, so the tolerance can be judged.
    boost::json::object event{{"wu_id", a.work_unit_id},
                              {"assignments", boost::json::array{twin->id, a.id}},
                              {"relative_l2", compared->relative_l2},
                              {"tolerance", task.config.replica_tolerance},
                              {"allowance", compared->allowance}};
    if (auto status = store_.add_event("replicas_compared", boost::json::serialize(event), clock_()); !status)
        return status;
    if (compared->agree()) {
        // One of the twins is merged: the first whose volunteer is not quarantined.
        auto twin_merged = accept(*twin, task, {twin->delta_norm.value_or(0), twin->gain_per_step}, true);
        if (!twin_merged) return twin_merged.error();
        auto merged = accept(a, task, figures, !*twin_merged);
        return merged ? common::Status() : common::Status(merged.error());
    }
    auto detail = "relative L2 distance " + std::to_string(compared->relative_l2) + " between replicas " + twin->id +
                  " and " + a.id + " exceeds " + std::to_string(compared->limit) + " (tolerance " +
                  std::to_string(task.config.replica_tolerance) + " + error-feedback allowance " +
                  std::to_string(compared->allowance) + ")";
    if (auto status = reject(*twin, task, reason::kReplicaMismatch, detail); !status) return status;
    return reject(a, task, reason::kReplicaMismatch, detail);
}

common::Status Validator::accept_alone(const AssignmentRecord& a) {
    auto task = load_task(store_, a.task_id);
    if (!task) return task.error();
    auto accepted = accept(a, *task, {a.delta_norm.value_or(0), a.gain_per_step}, true);
    return accepted ? common::Status() : common::Status(accepted.error());
}

common::Result<bool> Validator::accept(const AssignmentRecord& a, const TaskView& task, const CheckFigures& figures,
                                       bool merge) {
    auto client = store_.client(a.client_id);
    if (!client) return client.error();
    bool quarantined = *client && (*client)->quarantined;
    merge = merge && !quarantined;
    auto unit = store_.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    std::int64_t steps = *unit ? (*unit)->local_steps : task.config.local_steps;
    // A confirming twin earns credit as the merged one does; a quarantined volunteer none.
    double credit = quarantined ? 0.0 : credit_for(task.config, steps);
    auto accepted = store_.accept(a.id, figures, credit, merge, clock_());
    if (!accepted) return accepted.error();
    if (!*accepted) return false;
    if (merge) {
        on_accepted_(a.task_id, a.id);
    } else {
        results_.remove(a.id);
    }
    if (quarantined && (*client)->valid_streak + 1 >= task.config.trust_streak) {
        auto released = store_.set_client_quarantined(
            a.client_id, false, std::to_string(task.config.trust_streak) + " valid results in a row", clock_());
        if (!released) return released.error();
    }
    return merge;
}

common::Status Validator::reject(const AssignmentRecord& a, const TaskView& task, std::string_view why,
                                 const std::string& detail, std::optional<double> gain_per_step) {
    auto rejected = store_.reject(a.id, std::string(why), detail, clock_(), task.config.max_failures, gain_per_step);
    if (!rejected) return rejected.error();
    results_.remove(a.id);
    if (!*rejected) return {};
    const auto& c = task.config;
    auto recent = store_.rejections_since(a.client_id, clock_() - c.quarantine_window_s);
    if (!recent) return recent.error();
    if (*recent < c.quarantine_rejections) return {};
    auto quarantined = store_.set_client_quarantined(
        a.client_id, true,
        std::to_string(*recent) + " results refused within " + std::to_string(c.quarantine_window_s) + " s", clock_());
    return quarantined ? common::Status() : common::Status(quarantined.error());
}

}  // namespace tessera::server
