// ResultChecks: each check returns a named reason; figures go to the store with the verdict.
#include "result_checks.h"

#include "dataset_manifest.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "commitments_json.h"
#include "paired_losses.h"
#include "plain_number.h"
#include "rejection_reasons.h"
#include "tensor_math.h"

namespace tessera::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

std::string plain(double value) { return common::plain_number(value); }

void add_seconds(std::atomic<double>& total, SteadyClock::time_point started) {
    total.fetch_add(std::chrono::duration<double>(SteadyClock::now() - started).count());
}

bool all_finite(const common::NamedTensors& tensors) {
    for (const auto& t : tensors)
        for (float v : t.values)
            if (!std::isfinite(v)) return false;
    return true;
}

std::string describe(const common::DeltaEncoding& e) {
    return std::string(common::delta_dtype_name(e.dtype)) +
           (e.topk_fraction < 1 ? " top-k " + std::to_string(e.topk_fraction) : " dense");
}

Verdict refuse(std::string_view reason, std::string detail, Verdict verdict = {}) {
    verdict.reason = std::string(reason);
    verdict.detail = std::move(detail);
    return verdict;
}

}  // namespace

common::Result<Verdict> ResultChecks::run(const AssignmentRecord& a, const TaskView& task, const common::WorkUnit& unit,
                                          CheckPlan plan, const std::set<std::string>& suspended) {
    ++costs_.results;
    auto base = base_of(a, task, unit);
    if (!base) return base.error();
    const auto& model = **base;

    auto started = SteadyClock::now();
    auto bytes = results_.read_bytes(a.id);
    if (!bytes) return bytes.error();
    auto decoded = ResultFiles::decode(*bytes, value_count(model) + 1);
    add_seconds(costs_.decode, started);
    if (!decoded) return refuse(reason::kUndecodable, decoded.message());
    // The file's own metadata and part dtypes (the decoder checked they agree), not the manifest's.
    if (decoded->encoding.dtype != unit.encoding.dtype ||
        decoded->encoding.topk_fraction != unit.encoding.topk_fraction)
        return refuse(reason::kEncodingMismatch, "the file holds " + describe(decoded->encoding) +
                                                     "; the unit asked for " + describe(unit.encoding));
    const auto& delta = decoded->tensors;

    started = SteadyClock::now();
    if (auto layout = check_same_layout(model, delta); !layout) return refuse(reason::kShapeMismatch, layout.message());
    if (!all_finite(delta)) return refuse(reason::kNonFinite, "the delta holds NaN or infinity");
    Verdict verdict;
    verdict.figures.norm = l2_norm(delta);
    if (verdict.figures.norm == 0) return refuse(reason::kEmptyDelta, "the delta is all zeros", verdict);
    add_seconds(costs_.cheap, started);
    std::optional<Committed> committed;
    auto broken = commitment_checks(a, unit, model, delta, verdict, committed);
    if (!broken) return broken.error();
    if (*broken) return verdict;

    if (auto refused = cheap_checks(a, task, unit, delta, plan, suspended, verdict); !refused) return refused.error();
    // A drawn audit replays the unit whatever the statistics said (settle_by_replay); a replay
    // that agrees makes the loss checks, statistics too, unnecessary.
    if (plan.audit && verdict.reason != reason::kCopied)
        if (auto settled = settle_by_replay(a, unit, model, committed, true, verdict); !settled) return settled.error();
    if (verdict.reason.empty() && plan.loss_check && !verdict.audited) {
        if (plan.check_by_volunteers && plan.answered == nullptr) {
            verdict.wants_check = true;  // held for a loss-check unit's answer, whose check reads it decoded
            results_.keep_decoded(a.id, std::move(*decoded));
            return verdict;
        }
        if (auto status = planned_loss_checks(a, task, unit, model, delta, suspended, plan, verdict); !status)
            return status.error();
    }
    // A statistical check's flag replays the result where the plan says, and the replay decides.
    if (!plan.audit && plan.audit_flags && is_statistical(verdict.reason))
        if (auto settled = settle_by_replay(a, unit, model, committed, false, verdict); !settled)
            return settled.error();
    // Passed: the replica comparisons and the merge in this process use the decoded delta
    // instead of decoding it again.
    if (verdict.reason.empty()) results_.keep_decoded(a.id, std::move(*decoded));
    return verdict;
}

common::Result<std::shared_ptr<const common::NamedTensors>> ResultChecks::base_of(const AssignmentRecord& a,
                                                                                  const TaskView& task,
                                                                                  const common::WorkUnit& unit) {
    // Only a task with catch-up patches sends units based on a volunteer's own reconstruction.
    return task.config.catch_up_states > 0 ? models_.unit_base(unit) : models_.get(a.task_id, a.base_version);
}

AssignedSamples ResultChecks::assigned_samples(const common::WorkUnit& unit, std::int64_t max_samples) const {
    AssignedSamples samples;
    for (const auto& shard : unit.shards) samples.shards.push_back(shard.sha256);
    samples.read_shard = [this](const std::string& sha256) { return blobs_.read(sha256, common::kMaxShardBytes); };
    samples.seed = static_cast<std::uint64_t>(unit.hyper.seed);
    samples.batch_size = unit.hyper.batch_size;
    samples.steps = unit.hyper.local_steps;
    samples.max_samples = max_samples;
    return samples;
}

common::Result<bool> ResultChecks::commitment_checks(const AssignmentRecord& a, const common::WorkUnit& unit,
                                                     const common::NamedTensors& base,
                                                     const common::NamedTensors& delta, Verdict& verdict,
                                                     std::optional<Committed>& committed) {
    auto started = SteadyClock::now();
    auto stored = figures_.commitments_of(a.id);
    if (!stored) return stored.error();
    if (!*stored) return false;  // sent none: nothing to hold the upload to
    auto commitments = common::parse_commitments(**stored);
    auto broken = commitments ? common::commitments_mismatch(*commitments, delta, unit.hyper.local_steps,
                                                             static_cast<std::uint64_t>(unit.hyper.seed))
                              : commitments.message();
    if (!broken.empty()) {
        verdict = refuse(reason::kCommitmentMismatch, broken, std::move(verdict));
        return true;
    }
    auto pool = probes_.of(a.task_id);
    if (!pool) return pool.error();
    auto opening = (*pool)->opening_loss(base, assigned_samples(unit, 0), unit.hyper);
    add_seconds(costs_.commitments, started);
    if (!opening) return opening.error();
    auto reported = commitments->segments.front().loss;
    const bool on_cpu = trained_on_cpu(a);
    auto tolerance = on_cpu ? kCpuOpeningTolerance : kGpuOpeningTolerance;
    if (std::abs(*opening - reported) <= tolerance * std::max(std::abs(*opening), std::abs(reported))) {
        committed = Committed{std::move(*commitments), on_cpu};
        return false;
    }
    verdict = refuse(reason::kOpeningLossMismatch,
                     "the unit's first step has loss " + plain(*opening) + " at its base; its commitments report " +
                         plain(reported) + " (tolerance " + plain(tolerance) + " relative)",
                     std::move(verdict));
    return true;
}

namespace {

// Under a top-k codec a unit that carries the volunteer's residual sends mass of earlier
// units, and one that holds it (a replica) its own delta's top entries only: each is judged
// against its own kind. A dense codec's residual is within half a step: one pool.
NormPool norm_pool_of(const common::DeltaEncoding& encoding) {
    if (encoding.topk_fraction >= 1.0) return NormPool::All;
    return encoding.carry_residual ? NormPool::Single : NormPool::Replicated;
}

std::string_view pool_name(NormPool pool) {
    return pool == NormPool::All ? "" : pool == NormPool::Replicated ? " replicated" : " unreplicated";
}

// The unit's steps at the full rate (common::full_rate_steps), never zero.
double full_rate_steps_of(const common::WorkUnit& unit) {
    return std::max(1e-6, common::full_rate_steps(unit_rate_of(unit.hyper)));
}

// Sets the verdict's refusal, or notes it when the check is suspended; true when refused.
bool judge(Verdict& verdict, const std::set<std::string>& suspended, std::string_view why, std::string detail) {
    if (suspended.count(std::string(why)) > 0) {
        verdict.waived.push_back(std::string(why) + ": " + detail);
        return false;
    }
    verdict.reason = std::string(why);
    verdict.detail = std::move(detail);
    return true;
}

}  // namespace

common::Result<bool> ResultChecks::cheap_checks(const AssignmentRecord& a, const TaskView& task,
                                                const common::WorkUnit& unit, const common::NamedTensors& delta,
                                                const CheckPlan& plan, const std::set<std::string>& suspended,
                                                Verdict& verdict) {
    // Per step at the full rate: units are sized to each volunteer's speed, and a unit early in
    // the run's warm-up moves the weights less in proportion to its lower rates.
    auto started = SteadyClock::now();
    auto steps = full_rate_steps_of(unit);
    verdict.figures.full_rate_steps = steps;
    auto pool = norm_pool_of(unit.encoding);
    auto recent = figures_.recent_figures(a.task_id, kHistory, pool);
    if (!recent) return recent.error();
    const auto& norms = recent->norms_per_step;
    add_seconds(costs_.cheap, started);
    auto typical_norm = typical(a.task_id, norms, &Calibration::norm_per_step);
    if (!typical_norm) return typical_norm.error();
    if (*typical_norm) {
        double typical = **typical_norm;
        double per_step = verdict.figures.norm / steps;
        // Every figure compared, and where the typical one came from.
        auto source = norms.size() >= kMinFigures ? "the median of the last " + std::to_string(norms.size()) +
                                                        " accepted" + std::string(pool_name(pool)) + " results"
                                                  : std::string("the task's calibration unit, until ") +
                                                        std::to_string(kMinFigures) + " results are accepted";
        auto describe_norm = [&](const char* relation, double factor) {
            return "norm " + plain(verdict.figures.norm) + " over " + std::to_string(unit.hyper.local_steps) +
                   " steps (" + plain(steps) + " at the full rate) is " + plain(per_step) + " per full-rate step, " +
                   relation + " " + plain(factor) + " x the typical " + plain(typical) + " = " +
                   plain(factor * typical) + " per step (typical: " + source + ")";
        };
        if (per_step > task.config.norm_bound * typical &&
            judge(verdict, suspended, reason::kNormTooLarge, describe_norm("above", task.config.norm_bound)))
            return true;
        if (per_step < task.config.norm_floor * typical &&
            judge(verdict, suspended, reason::kNormTooSmall, describe_norm("below", task.config.norm_floor)))
            return true;
    }

    started = SteadyClock::now();
    verdict.sketch = sketch_of(delta);
    auto match = copies_.most_similar(a.task_id, a.work_unit_id, verdict.sketch);
    auto alignment = copies_.consensus_alignment(a.task_id, a.work_unit_id, verdict.sketch,
                                                 {a.base_version, a.returned_at.value_or(0)}, plan.warm_up);
    verdict.figures.alignment = alignment;
    add_seconds(costs_.copy, started);
    auto threshold = alignment_threshold(recent->alignments, task.config.min_alignment);
    if (match.similarity > task.config.copy_similarity) {
        verdict.reason = std::string(reason::kCopied);
        verdict.detail = "cosine similarity " + std::to_string(match.similarity) + " with " + match.what +
                         " exceeds " + std::to_string(task.config.copy_similarity);
        return true;
    }
    return alignment && *alignment < threshold &&
           judge(verdict, suspended, reason::kMisaligned,
                 "cosine similarity " + std::to_string(*alignment) +
                     " with the consensus of recent results of other units is below " + std::to_string(threshold) +
                     (threshold < task.config.min_alignment
                          ? " (the median of recent valid results less " + plain(kAlignmentSpreads) + " spreads)"
                          : ""));
}

common::Status ResultChecks::planned_loss_checks(const AssignmentRecord& a, const TaskView& task,
                                                 const common::WorkUnit& unit, const common::NamedTensors& base,
                                                 const common::NamedTensors& delta,
                                                 const std::set<std::string>& suspended, const CheckPlan& plan,
                                                 Verdict& verdict) {
    auto unjudged = verdict;
    if (plan.answered == nullptr) ++costs_.loss_checked;
    if (auto status = loss_checks(a, task, unit, base, delta, suspended, verdict, plan.answered); !status)
        return status;
    if (plan.answered == nullptr ||
        (verdict.reason != reason::kLossIncrease && verdict.reason != reason::kNoImprovement))
        return {};
    // The server's final say: a checker's figures refuse nothing until the server's agree.
    verdict = std::move(unjudged);
    ++costs_.loss_checked;
    return loss_checks(a, task, unit, base, delta, suspended, verdict, nullptr);
}

common::Status ResultChecks::loss_checks(const AssignmentRecord& a, const TaskView& task, const common::WorkUnit& unit,
                                         const common::NamedTensors& base, const common::NamedTensors& delta,
                                         const std::set<std::string>& suspended, Verdict& verdict,
                                         const common::LossReport* answered) {
    verdict.loss_checked = true;
    auto after = answered ? common::NamedTensors() : applied(base, delta);
    auto steps = full_rate_steps_of(unit);

    // Held-out data first: the base model's losses are cached per model, so it costs one evaluation
    // (two for a unit based on its volunteer's own catch-up reconstruction).
    auto started = SteadyClock::now();
    auto before = answered ? common::Result<std::vector<double>>(answered->held_out_before)
                           : held_out_base_losses(a.task_id, unit.model_blob.sha256, base, task.config.check_samples);
    if (!before) return before.error();
    auto pool = probes_.of(a.task_id);
    if (!pool) return pool.error();
    auto held_out = answered ? common::Result<SampleLosses>(answered->held_out_after)
                             : (*pool)->check_losses(after, task.config.check_samples);
    if (!answered) add_seconds(costs_.held_out, started);
    if (!held_out) return held_out.error();
    auto change = paired_change(*before, *held_out);
    if (!change) return change.error();
    // Refused only when the increase is above the tolerance with kRefusalZ confidence.
    double allowed = change->before * task.config.loss_tolerance;
    if (!(change->low() <= allowed) &&
        judge(verdict, suspended, reason::kLossIncrease,
              "held-out loss went from " + std::to_string(change->before) + " to " + std::to_string(change->after) +
                  " on " + std::to_string(change->samples) + " samples: an increase of at least " +
                  std::to_string(change->low()) + " (" + std::to_string(kRefusalZ) +
                  " standard errors below the mean), above the tolerance " + std::to_string(allowed)))
        return {};
    verdict.held_out_gain = change->before > 0 ? -change->change() / change->before : 0;

    // Proof of training: the loss on the samples the unit trained on first, before and after.
    started = SteadyClock::now();
    auto own = answered
                   ? common::Result<std::vector<SampleLosses>>({answered->own_before, answered->own_after})
                   : (*pool)->losses_on_assigned({&base, &after}, assigned_samples(unit, task.config.check_samples));
    if (!answered) add_seconds(costs_.own_samples, started);
    if (!own) return own.error();
    auto own_change = paired_change((*own)[0], (*own)[1]);
    if (!own_change) return own_change.error();
    // Relative to the loss before, per step: the gain, and the most the data allow it to be.
    double scale = own_change->before > 0 ? own_change->before * steps : 0;
    double gain = scale > 0 ? -own_change->change() / scale : 0;
    double gain_bound = scale > 0 ? -own_change->low() / scale : 0;
    verdict.figures.gain_per_step = gain;
    auto threshold = gain_threshold(a.task_id, task.config, a.base_version, steps);
    if (!threshold) return threshold.error();
    if (!(gain_bound > threshold->value) &&
        judge(verdict, suspended, reason::kNoImprovement,
              "loss on the unit's own samples went from " + std::to_string(own_change->before) + " to " +
                  std::to_string(own_change->after) + ": a gain of " + plain(gain) + " per full-rate step over " +
                  plain(steps) + " (at most " + plain(gain_bound) + "), not above the margin " +
                  plain(threshold->value) + " (" + threshold->source + ")"))
        return {};
    verdict.flagged = verdict.held_out_gain >= gain * steps;
    return {};
}

common::Result<ResultChecks::GainThreshold> ResultChecks::gain_threshold(const std::string& task_id,
                                                                         const TaskConfig& config,
                                                                         std::int64_t base_version,
                                                                         double full_rate_steps) {
    auto gains = figures_.recent_gains_per_step(task_id, kHistory);
    if (!gains) return gains.error();
    if (gains->size() >= kMinFigures) {
        double comparable = kComparableSteps * full_rate_steps;
        auto current = figures_.recent_gains_per_step(task_id, kHistory, base_version - kGainVersions, comparable);
        if (!current) return current.error();
        return GainThreshold{gain_margin(*gains, *current, config.min_gain),
                             "the lower of " + plain(config.min_gain) + " x the median of " +
                                 std::to_string(current->size()) + " current gains (units of " + plain(comparable) +
                                 " full-rate steps or more) and the median of the last " +
                                 std::to_string(gains->size()) + " less " + plain(kGainSpreads) + " spreads"};
    }
    auto typical_gain = typical(task_id, *gains, &Calibration::gain_per_step);
    if (!typical_gain) return typical_gain.error();
    // Without a calibration or recent results, the margin is "any improvement at all".
    if (!*typical_gain) return GainThreshold{0.0, "any gain: the task has no calibration"};
    return GainThreshold{config.min_gain * std::max(0.0, **typical_gain),
                         plain(config.min_gain) + " x the calibration's gain " + plain(**typical_gain) +
                             " per step, until " + std::to_string(kMinFigures) + " gains are measured"};
}

common::Result<std::optional<double>> ResultChecks::typical(const std::string& task_id,
                                                            const std::vector<double>& recent,
                                                            double Calibration::*figure) {
    if (recent.size() >= kMinFigures) return std::optional<double>(median_of(recent));
    std::lock_guard lock(mutex_);
    auto found = calibrations_.find(task_id);
    if (found == calibrations_.end()) {
        auto loaded = load_calibration(settings_, task_id);
        if (!loaded) return loaded.error();
        found = calibrations_.emplace(task_id, *loaded).first;
    }
    if (!found->second || !((*found->second).*figure > 0)) return std::optional<double>();
    return std::optional<double>((*found->second).*figure);
}

common::Result<std::vector<double>> ResultChecks::held_out_base_losses(const std::string& task_id,
                                                                       const std::string& model_sha256,
                                                                       const common::NamedTensors& base,
                                                                       std::int64_t samples) {
    auto key = task_id + "/" + model_sha256 + "/" + std::to_string(samples);
    {
        std::lock_guard lock(mutex_);
        if (base_loss_key_ == key) return base_losses_;
    }
    auto pool = probes_.of(task_id);
    if (!pool) return pool.error();
    auto result = (*pool)->check_losses(base, samples);
    if (!result) return result.error();
    std::lock_guard lock(mutex_);
    base_loss_key_ = key;
    base_losses_ = *result;
    return std::move(*result);
}

}  // namespace tessera::server
