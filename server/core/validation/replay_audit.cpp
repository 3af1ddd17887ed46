// Replay audits (replay_audit.h).
#include "replay_audit.h"

#include <chrono>

#include "commitments.h"

namespace tessera::server {
namespace {

AuditOutcome not_audited(std::string why) { return {false, std::move(why), {}}; }
AuditOutcome failed(std::string why) { return {true, {}, std::move(why)}; }

}  // namespace

common::Result<AuditOutcome> ReplayAudit::run(const AssignmentRecord& a, const common::WorkUnit& unit,
                                              const common::NamedTensors& base, const common::Commitments* commitments,
                                              const AssignedSamples& samples, bool trained_on_cpu) {
    if (commitments == nullptr) return not_audited("it was sent without commitments");
    if (!commitments->moments_in) return not_audited("its commitments do not say which moments it started from");
    const auto& stated = *commitments->moments_in;
    std::optional<ReplayMoments> moments;
    if (!stated.sha256.empty()) {
        if (unit.hyper.optimizer != common::InnerOptimizer::Kept)
            return failed("a fresh unit's commitments say it resumed kept moments");
        if (moments_) moments = moments_(a.id);
        if (!moments) return not_audited("it resumed kept moments the server does not have");
        if (common::moments_sha256(moments->exp_avg, moments->exp_avg_sq) != stated.sha256 ||
            moments->steps != stated.steps)
            return failed("the moments it resumed are not those its commitments name");
    }
    auto pool = probes_.of(a.task_id);
    if (!pool) return pool.error();
    auto started = std::chrono::steady_clock::now();
    auto replayed = (*pool)->replay(base, samples, unit.hyper, moments ? &*moments : nullptr);
    costs_.audit.fetch_add(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (!replayed) return replayed.error();
    ++costs_.audited;
    auto tolerance = trained_on_cpu ? kCpuReplayTolerance : kGpuReplayTolerance;
    return AuditOutcome{true, {}, common::trajectory_mismatch(*commitments, *replayed, tolerance), tolerance};
}

}  // namespace tessera::server
