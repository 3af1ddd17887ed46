// ResultChecks: the replay audits (replay_audit.h) of a result drawn for one at its upload, of one
// a statistical check flagged, and of one whose audit twin never came.
#include "result_checks.h"

#include "plain_number.h"
#include "rejection_reasons.h"

namespace tessera::server {

bool is_statistical(std::string_view reason) {
    return reason == reason::kNormTooLarge || reason == reason::kNormTooSmall || reason == reason::kMisaligned ||
           reason == reason::kNoImprovement || reason == reason::kLossIncrease;
}

common::Result<bool> ResultChecks::audit(const AssignmentRecord& a, const common::WorkUnit& unit,
                                         const common::NamedTensors& base, const std::optional<Committed>& committed,
                                         Verdict& verdict, bool drawn) {
    auto outcome = audit_.run(a, unit, base, committed ? &committed->commitments : nullptr, assigned_samples(unit, 0),
                              committed && committed->on_cpu);
    if (!outcome) return outcome.error();
    verdict.audited = outcome->audited;
    verdict.wants_moments = outcome->needs_moments;
    if (outcome->withheld) {
        verdict.reason = std::string(reason::kMomentsWithheld);
        verdict.detail = "its audit asked for the moments its unit started from, and none came within " +
                         std::to_string(kMomentsWaitS) + " s";
        return true;
    }
    if (!outcome->audited) {
        if (drawn) {
            ++costs_.unauditable;
            verdict.not_audited = outcome->not_audited;
        }
        return false;
    }
    if (outcome->mismatch.empty()) return false;
    verdict.reason = std::string(reason::kAuditFailed);
    verdict.detail = "its replay disagrees: " + outcome->mismatch;
    if (outcome->tolerance > 0)
        verdict.detail += " (tolerance " + common::plain_number(outcome->tolerance) + " relative)";
    return true;
}

common::Result<bool> ResultChecks::settle_by_replay(const AssignmentRecord& a, const common::WorkUnit& unit,
                                                    const common::NamedTensors& base,
                                                    const std::optional<Committed>& committed, bool drawn,
                                                    Verdict& verdict) {
    // The statistical check's refusal, if one flagged it: the replay decides instead.
    std::string flag_reason = std::move(verdict.reason), flag_detail = std::move(verdict.detail);
    verdict.reason.clear();
    verdict.detail.clear();
    auto refused = audit(a, unit, base, committed, verdict, drawn);
    if (!refused) return refused.error();
    if (flag_reason.empty()) return *refused;
    if (*refused) {
        verdict.detail = "flagged " + flag_reason + " (" + flag_detail + "); " + verdict.detail;
        return true;
    }
    if (!verdict.audited) {  // cannot be replayed (yet): the flag's refusal stands, or waits
        verdict.reason = std::move(flag_reason);
        verdict.detail = std::move(flag_detail);
        return true;
    }
    verdict.overruled = flag_reason + ": " + flag_detail;
    return false;
}

common::Result<Verdict> ResultChecks::audit_alone(const AssignmentRecord& a, const TaskView& task,
                                                  const common::WorkUnit& unit,
                                                  std::optional<common::Commitments> commitments) {
    auto base = base_of(a, task, unit);
    if (!base) return base.error();
    std::optional<Committed> committed;
    if (commitments) committed = Committed{std::move(*commitments), trained_on_cpu(a)};
    Verdict verdict;
    verdict.figures = a.figures();
    auto refused = audit(a, unit, **base, committed, verdict, true);
    if (!refused) return refused.error();
    return verdict;
}

}  // namespace tessera::server
