// Replay audits (docs/operations.md, "Replay audits"): a result drawn for one has its unit
// trained again by the server, from the same base, shards, seed and optimizer state, and the
// replay's commitments compared segment by segment with the volunteer's at a tolerance set by
// the device the volunteer named (a CPU's f32 against the server's far tighter than a GPU's
// bf16). The upload itself is already bound to the committed trajectory (commitments_mismatch),
// so a unit whose trajectory replays is the one its upload came from. Thread-safe.
#pragma once

#include <optional>
#include <string>

#include "blob_store.h"
#include "check_costs.h"
#include "model_probe.h"
#include "protocol.h"
#include "records.h"
#include "result_files.h"

namespace tessera::server {

// How far a replayed trajectory may sit from the committed one, relative: a CPU's f32 against
// the server's (summation order and thread count only), and a GPU's bf16 autocast (CPU-GPU
// replicas differed by 0.006-0.011 relative L2 with lossless deltas; issue 57 settles it).
constexpr double kCpuReplayTolerance = 1e-3;
constexpr double kGpuReplayTolerance = 5e-2;

// Whether the result's manifest said it was computed on a CPU (its `device`, kept with the
// metrics): CPU results reproduce the server's arithmetic far more closely than bf16 GPU ones.
bool trained_on_cpu(const AssignmentRecord& assignment);
// The replay tolerance between two trajectories: the CPU's when both were computed on CPUs.
inline double replay_tolerance(bool both_on_cpu) { return both_on_cpu ? kCpuReplayTolerance : kGpuReplayTolerance; }

// The wait for the moments a kept unit started from, once its upload's answer asked for them:
// its result is validated when they come, or refused `moments_withheld` after this.
constexpr std::int64_t kMomentsWaitS = 600;

// What the intake drew for a result, kept with its metrics (`audit`): "" none, "replay" a
// replay from zero moments, "moments" a replay from the kept moments the volunteer was asked
// for, "twin" its unit computed again by a trusted volunteer (a task's `audit_by volunteers`).
std::string audit_asked(const AssignmentRecord& assignment);
// When the moments were asked for: at the upload for a drawn audit (its return), or when a
// statistical check flagged it (the metrics' `moments_asked_at`).
std::int64_t moments_asked_at(const AssignmentRecord& assignment);
// Whether the moments were asked for because a statistical check flagged the result (not
// drawn at its upload): the metrics name the flag.
bool asked_for_a_flag(const AssignmentRecord& assignment);
// The metrics of a result held for the moments its flag needs replayed: `audit` "moments",
// `moments_asked_at` `now`, the flag (`flagged`, "<reason>: <detail>") and the gain per step
// its loss checks measured, if they ran (`flag_gain_per_step`, `flag_full_rate_steps`).
std::string metrics_asking_moments(const AssignmentRecord& assignment, const std::string& flagged,
                                   const CheckFigures& figures, std::int64_t now);
// A result drawn for the loss checks in a task whose volunteers evaluate them waits for a
// loss-check unit's answer until the metrics' `check_until` (none: it was not held for one).
std::optional<std::int64_t> check_wait_end(const AssignmentRecord& assignment);
std::string metrics_asking_check(const AssignmentRecord& assignment, std::int64_t until);
// What a held result's flag left for its second validation, once its moments came: the flag
// and the gain its loss checks measured. A replay that agrees overrules the flag and skips the
// loss checks, so without these the flag would go uncounted and the gain would never join the
// recent gains the next results' margin is drawn from.
struct HeldFlag {
    std::string flagged;  // "" when the result was not held for a flag
    std::optional<double> gain_per_step;
    std::optional<double> full_rate_steps;
};
HeldFlag held_flag(const AssignmentRecord& assignment);

// What an audit found: `audited` false with why it could not replay (the other checks judge
// the result); `mismatch` empty when the replay agreed; `withheld` when the moments it asked
// for never came; `needs_moments` when it resumed kept moments nobody asked for yet.
struct AuditOutcome {
    bool audited = false;
    std::string not_audited;
    std::string mismatch;
    double tolerance = 0;  // the replay's, when the trajectories were compared
    bool withheld = false;
    bool needs_moments = false;
};

class ReplayAudit {
public:
    // `results`: where the moments volunteers send for their audits are kept; `blobs`: where
    // audit twins' moments are published (twin_moments.h).
    ReplayAudit(ProbePools& probes, const ResultFiles& results, const BlobStore& blobs, CheckCosts& costs)
        : probes_(probes), results_(results), blobs_(blobs), costs_(costs) {}

    // Replays `unit` from `base` on `samples` (all of its first epoch's) and compares with
    // `commitments` (nullptr: none sent, not auditable). An error is the server's.
    common::Result<AuditOutcome> run(const AssignmentRecord& assignment, const common::WorkUnit& unit,
                                     const common::NamedTensors& base, const common::Commitments* commitments,
                                     const AssignedSamples& samples, bool trained_on_cpu);

private:
    // The moments a kept unit resumed, as its volunteer sent them; none when they never came.
    common::Result<std::optional<ReplayMoments>> sent_moments(const std::string& assignment_id, std::string& broken);
    // An audit twin's moments, from the blob its unit names.
    common::Result<std::optional<ReplayMoments>> twin_moments(const common::BlobRef& blob, std::string& broken);

    ProbePools& probes_;
    const ResultFiles& results_;
    const BlobStore& blobs_;
    CheckCosts& costs_;
};

}  // namespace tessera::server
