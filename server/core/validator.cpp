// Validator: the content checks on a returned result and the replica comparison.
#include "validator.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include <boost/json.hpp>

#include "rejection_reasons.h"
#include "result_files.h"
#include "tensor_math.h"

namespace tessera::server {
namespace {

constexpr int kNormHistory = 50;
constexpr std::size_t kMinNormsForBound = 5;

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    auto n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

bool all_finite(const common::NamedTensors& tensors) {
    for (const auto& t : tensors)
        for (float v : t.values)
            if (!std::isfinite(v)) return false;
    return true;
}

}  // namespace

Validator::Validator(Store& store, ResultFiles& results, ModelCache& models, ProbePool& probes, Clock clock,
                     std::function<void(const std::string&)> on_accepted, std::uint64_t seed)
    : store_(store), results_(results), models_(models), probes_(probes), clock_(std::move(clock)),
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

bool Validator::sample_loss_check(double fraction) {
    std::lock_guard lock(mutex_);
    return std::uniform_real_distribution<double>(0, 1)(rng_) < fraction;
}

common::Result<double> Validator::base_loss(const std::string& task_id, std::int64_t version,
                                            const common::NamedTensors& base, std::int64_t samples) {
    auto key = task_id + "/" + std::to_string(version);
    {
        std::lock_guard lock(mutex_);
        if (base_loss_key_ == key) return base_loss_value_;
    }
    auto result = probes_.evaluate(base, samples);
    if (!result) return result.error();
    std::lock_guard lock(mutex_);
    base_loss_key_ = key;
    base_loss_value_ = result->loss;
    return result->loss;
}

common::Result<Validator::Verdict> Validator::check(const AssignmentRecord& a, const TaskView& task,
                                                    std::int64_t local_steps) {
    auto base = models_.get(a.task_id, a.base_version);
    if (!base) return base.error();
    const auto& model = **base;
    auto bytes = results_.read_bytes(a.id);
    if (!bytes) return bytes.error();  // the disk's fault, not the result's: no verdict yet
    auto delta = decode_result_delta(*bytes, value_count(model) + 1);
    if (!delta) return Verdict{std::string(reason::kUndecodable), delta.message()};
    if (auto layout = check_same_layout(model, *delta); !layout)
        return Verdict{std::string(reason::kShapeMismatch), layout.message()};
    if (!all_finite(*delta)) return Verdict{std::string(reason::kNonFinite), "the delta holds NaN or infinity"};
    double norm = l2_norm(*delta);
    if (norm == 0) return Verdict{std::string(reason::kEmptyDelta), "the delta is all zeros", norm};

    // Per local step, since units are sized to each volunteer's speed (and warm-ups are short).
    auto steps = static_cast<double>(local_steps);
    auto norms = store_.recent_norms_per_step(a.task_id, kNormHistory);
    if (!norms) return norms.error();
    if (norms->size() >= kMinNormsForBound) {
        double bound = task.config.norm_bound * median(*norms);
        if (norm / steps > bound)
            return Verdict{std::string(reason::kNormTooLarge),
                           "norm " + std::to_string(norm) + " over " + std::to_string(static_cast<int>(steps)) +
                               " steps exceeds " + std::to_string(task.config.norm_bound) +
                               " x the median per step of recent results (" + std::to_string(bound * steps) + ")",
                           norm};
    }

    if (sample_loss_check(task.config.loss_check)) {
        auto before = base_loss(a.task_id, a.base_version, model, task.config.eval_samples);
        if (!before) return before.error();
        auto applied = model;
        for (std::size_t i = 0; i < applied.size(); ++i)
            for (std::size_t j = 0; j < applied[i].values.size(); ++j) applied[i].values[j] += (*delta)[i].values[j];
        auto after = probes_.evaluate(applied, task.config.eval_samples);
        if (!after) return after.error();
        double limit = *before * (1 + task.config.loss_tolerance);
        if (!(after->loss <= limit))
            return Verdict{std::string(reason::kLossIncrease),
                           "held-out loss " + std::to_string(after->loss) + " after the delta exceeds " +
                               std::to_string(limit) + " (base " + std::to_string(*before) + ")",
                           norm};
    }
    return Verdict{"", "", norm};
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
    auto verdict = check(a, *task, *unit ? (*unit)->local_steps : task->config.local_steps);
    if (!verdict) return verdict.error();
    if (!verdict->reason.empty()) return reject(a, *task, verdict->reason, verdict->detail);
    if (*unit && (*unit)->replicas > 1) return settle_replicas(a, *task, verdict->norm);
    return accept(a, *task, verdict->norm, true);
}

// A replicated unit: wait for the twin, then compare the two deltas.
common::Status Validator::settle_replicas(const AssignmentRecord& a, const TaskView& task, double norm) {
    std::lock_guard lock(replica_mutex_);
    auto marked = store_.mark_validated(a.id, norm, clock_());
    if (!marked) return marked.error();
    auto siblings = store_.assignments_of(a.work_unit_id);
    if (!siblings) return siblings.error();
    const AssignmentRecord* twin = nullptr;
    for (const auto& s : *siblings)
        if (s.id != a.id && s.state == AssignmentState::Validated) twin = &s;
    if (!twin) return {};  // the twin validates later and settles both
    auto base = models_.get(a.task_id, a.base_version);
    if (!base) return base.error();
    auto mine = results_.read(a.id, value_count(**base) + 1);
    auto theirs = results_.read(twin->id, value_count(**base) + 1);
    if (!mine) return mine.error();
    if (!theirs) return theirs.error();
    auto distance = relative_l2(*mine, *theirs);
    if (!distance) return distance.error();
    // The distance of every comparison, agreed or not, so the tolerance can be judged.
    boost::json::object compared{{"wu_id", a.work_unit_id},
                                 {"assignments", boost::json::array{twin->id, a.id}},
                                 {"relative_l2", *distance},
                                 {"tolerance", task.config.replica_tolerance}};
    if (auto status = store_.add_event("replicas_compared", boost::json::serialize(compared), clock_()); !status)
        return status;
    if (*distance <= task.config.replica_tolerance) {
        if (auto status = accept(*twin, task, twin->delta_norm.value_or(0), true); !status) return status;
        return accept(a, task, norm, false);
    }
    auto detail = "relative L2 distance " + std::to_string(*distance) + " between replicas " + twin->id + " and " +
                  a.id + " exceeds " + std::to_string(task.config.replica_tolerance);
    if (auto status = reject(*twin, task, reason::kReplicaMismatch, detail); !status) return status;
    return reject(a, task, reason::kReplicaMismatch, detail);
}

common::Status Validator::accept_alone(const AssignmentRecord& a) {
    auto task = load_task(store_, a.task_id);
    if (!task) return task.error();
    return accept(a, *task, a.delta_norm.value_or(0), true);
}

common::Status Validator::accept(const AssignmentRecord& a, const TaskView& task, double norm, bool merge) {
    auto unit = store_.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    std::int64_t steps = *unit ? (*unit)->local_steps : task.config.local_steps;
    auto accepted = store_.accept(a.id, norm, credit_for(task.config, steps), merge, clock_());
    if (!accepted) return accepted.error();
    if (!*accepted) return {};
    if (merge) {
        on_accepted_(a.id);
    } else {
        results_.remove(a.id);
    }
    return {};
}

common::Status Validator::reject(const AssignmentRecord& a, const TaskView& task, std::string_view why,
                                 const std::string& detail) {
    auto rejected = store_.reject(a.id, std::string(why), detail, clock_(), task.config.max_failures);
    if (!rejected) return rejected.error();
    results_.remove(a.id);
    return {};
}

}  // namespace tessera::server
