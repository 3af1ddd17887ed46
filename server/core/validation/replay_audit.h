// Replay audits (docs/operations.md, "Replay audits"): a result drawn for one has its unit
// trained again by the server, from the same base, shards, seed and optimizer state, and the
// replay's commitments compared segment by segment with the volunteer's at a tolerance set by
// the device the volunteer named (a CPU's f32 against the server's far tighter than a GPU's
// bf16). The upload itself is already bound to the committed trajectory (commitments_mismatch),
// so a unit whose trajectory replays is the one its upload came from. Thread-safe.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "check_costs.h"
#include "model_probe.h"
#include "protocol.h"
#include "records.h"

namespace tessera::server {

// How far a replayed trajectory may sit from the committed one, relative: a CPU's f32 against
// the server's (summation order and thread count only), and a GPU's bf16 autocast (CPU-GPU
// replicas differed by 0.006-0.011 relative L2 with lossless deltas; issue 57 settles it).
constexpr double kCpuReplayTolerance = 1e-3;
constexpr double kGpuReplayTolerance = 5e-2;

// What an audit found: `audited` false with why it could not replay (the other checks judge
// the result); `mismatch` empty when the replay agreed.
struct AuditOutcome {
    bool audited = false;
    std::string not_audited;
    std::string mismatch;
    double tolerance = 0;  // the replay's, when the trajectories were compared
};

// The kept moments a result's unit resumed, by its assignment id, when the server has them.
using MomentsSource = std::function<std::optional<ReplayMoments>(const std::string& assignment_id)>;

class ReplayAudit {
public:
    ReplayAudit(ProbePools& probes, CheckCosts& costs) : probes_(probes), costs_(costs) {}

    // A server has no volunteer's moments yet (volunteers will upload them on request,
    // docs/plans/verification.md), so a unit that resumed kept moments cannot be audited; the
    // fleet simulator's volunteers hand theirs over. Set before results are checked.
    void set_moments_source(MomentsSource source) { moments_ = std::move(source); }

    // Replays `unit` from `base` on `samples` (all of its first epoch's) and compares with
    // `commitments` (nullptr: none sent, not auditable). An error is the server's.
    common::Result<AuditOutcome> run(const AssignmentRecord& assignment, const common::WorkUnit& unit,
                                     const common::NamedTensors& base, const common::Commitments* commitments,
                                     const AssignedSamples& samples, bool trained_on_cpu);

private:
    ProbePools& probes_;
    CheckCosts& costs_;
    MomentsSource moments_;
};

}  // namespace tessera::server
