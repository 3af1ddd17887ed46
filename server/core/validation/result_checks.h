// The content checks of one returned result, cheapest first (docs/operations.md,
// "Validation"): it decodes; the file holds the encoding the unit asked for; names, shapes
// and dtypes match the model; every value is finite; it is not all zeros; its norm per step
// lies between the floor and the bound set by recent accepted results; it is not a copy of a
// recent version update or of another unit's result; it points the way recent results of
// other units point (not noise, not reversed). A result chosen for the loss checks must then
// not raise the held-out loss beyond the tolerance, and must lower the loss on the samples
// its unit trained on by a margin recent results set (proof of training); both compare
// per-sample losses before and after the delta (paired_losses.h). A check the stall guard
// suspended for the task does not refuse: the verdict notes what it would have said.
// Thread-safe: results are checked concurrently on the work pool.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "blob_store.h"
#include "calibration.h"
#include "check_margins.h"
#include "check_costs.h"
#include "copy_detector.h"
#include "model_cache.h"
#include "model_probe.h"
#include "loss_report.h"
#include "protocol.h"
#include "replay_audit.h"
#include "result_files.h"
#include "store_results.h"
#include "store_settings.h"
#include "task_lookup.h"

namespace tessera::server {

struct Verdict {
    std::string reason;  // empty: passed
    std::string detail;
    CheckFigures figures;
    DeltaSketch sketch;         // of a delta that decoded with the model's layout
    bool loss_checked = false;  // the loss checks ran
    // Passed, but improved held-out data as much as its own samples: what a delta that was
    // not trained on the unit's samples (a replay) looks like. Young models show it too.
    bool flagged = false;
    double held_out_gain = 0;
    // "<reason>: <detail>" of each suspended check the result failed (and was not refused for).
    std::vector<std::string> waived;
    bool audited = false;     // replayed (and agreed, unless refused for it)
    std::string not_audited;  // drawn for an audit, why it could not replay
    // "<reason>: <detail>" of a statistical check's refusal its replay overruled.
    std::string overruled;
    // Flagged by a statistical check (`reason`, `detail`) and replayable once its volunteer
    // sends the kept moments its unit resumed: held for them instead of refused.
    bool wants_moments = false;
    // Passed the other checks and drawn for the loss checks in a task whose volunteers evaluate
    // them: held for a loss-check unit's answer (CheckPlan::answered).
    bool wants_check = false;
};

// Which checks beyond the cheap ones a result gets.
struct CheckPlan {
    bool loss_check = false;  // the loss checks (own samples, held-out data)
    // A replay audit (replay_audit.h), drawn when the result was uploaded; a result that cannot
    // be replayed is counted and judged by the other checks.
    bool audit = false;
    // A volunteer's first unit while units are sized to speeds: its alignment is judged by the
    // other warm-up units' consensus (CopyDetector::consensus_alignment).
    bool warm_up = false;
    // A statistical check's refusal replays the result instead, where it can be replayed, and
    // the replay decides (docs/operations.md, "Flags settled by replays").
    bool audit_flags = false;
    // The loss checks by a loss-check unit (docs/operations.md, "Loss-check units"): without an
    // answer the verdict `wants_check`; with one, its losses stand in for the server's, save
    // for a refusal, which the server measures for itself before it stands.
    bool check_by_volunteers = false;
    const common::LossReport* answered = nullptr;
};

// The checks that judge a result by comparing it with others (norms, alignment, losses), whose
// refusals a replay may overrule.
bool is_statistical(std::string_view reason);

// How far a result's opening loss may sit from the server's, relative: a CPU's f32 against the
// server's (summation order only), and a GPU's bf16 autocast (to be settled on GPUs, issue 57).
constexpr double kCpuOpeningTolerance = 1e-4;
constexpr double kGpuOpeningTolerance = 5e-2;

class ResultChecks {
public:
    // Statistics come from this many recent accepted results, once there are kMinFigures;
    // before that, from the task's calibration.
    static constexpr int kHistory = 50;
    static constexpr std::size_t kMinFigures = kMinMarginFigures;

    // `figures`: the recent accepted results' figures; `settings`: the task's calibration.
    ResultChecks(ResultStore& figures, SettingStore& settings, ResultFiles& results, ModelCache& models,
                 ProbePools& probes, const BlobStore& blobs, CopyDetector& copies, CheckCosts& costs)
        : figures_(figures), settings_(settings), results_(results), models_(models), probes_(probes), blobs_(blobs),
          copies_(copies), costs_(costs), audit_(probes, results, blobs, costs) {}

    // `unit` is the work unit as sent; `plan` says which checks run; the checks named in
    // `suspended` note their refusals instead of refusing.
    // An error is the server's (disk, database, probe), not the result's: no verdict yet.
    common::Result<Verdict> run(const AssignmentRecord& assignment, const TaskView& task, const common::WorkUnit& unit,
                                CheckPlan plan, const std::set<std::string>& suspended = {});
    // The replay audit alone, of a result that passed the other checks already (an audit twin
    // no volunteer computed in time): its verdict names only the audit's refusal.
    common::Result<Verdict> audit_alone(const AssignmentRecord& assignment, const TaskView& task,
                                        const common::WorkUnit& unit, std::optional<common::Commitments> commitments);
    // A loss-check unit's report on the result of `assignment` (result_checks_spot.cpp): its
    // lengths those the server's checks would evaluate, and kSpotRows rows of each of its four
    // arrays (drawn from `seed`) recomputed at the CPU's tolerance. "" when it agrees, else what
    // differs. An error is the server's (the result's file gone, a probe).
    static constexpr std::size_t kSpotRows = 16;
    common::Result<std::string> spot_check(const AssignmentRecord& assignment, const TaskView& task,
                                           const common::WorkUnit& unit, const common::LossReport& report,
                                           std::uint64_t seed);

private:
    // A result's commitments as read once, and whether its manifest named a CPU (the tolerances).
    struct Committed {
        common::Commitments commitments;
        bool on_cpu = false;
    };
    // The checks of a result's commitments (docs/protocol.md, "Commitments"), when it was sent
    // with them: their identity with the decoded delta, and its opening loss recomputed at
    // `base`. True when the verdict is a refusal; `committed` is set once they pass.
    common::Result<bool> commitment_checks(const AssignmentRecord& assignment, const common::WorkUnit& unit,
                                           const common::NamedTensors& base, const common::NamedTensors& delta,
                                           Verdict& verdict, std::optional<Committed>& committed);
    // The base the result's unit trained from.
    common::Result<std::shared_ptr<const common::NamedTensors>> base_of(const AssignmentRecord& assignment,
                                                                        const TaskView& task,
                                                                        const common::WorkUnit& unit);
    // The replay audit (result_checks_audit.cpp); true when the verdict is a refusal. A result
    // `drawn` for one that cannot be replayed is counted and noted in the verdict.
    common::Result<bool> audit(const AssignmentRecord& assignment, const common::WorkUnit& unit,
                               const common::NamedTensors& base, const std::optional<Committed>& committed,
                               Verdict& verdict, bool drawn);
    // A replay in place of the verdict's statistical refusal, if it has one: agreeing overrules
    // it, disagreeing refuses `audit_failed`; a result that cannot be replayed keeps it, and
    // one that can once its kept moments come is marked `wants_moments`.
    common::Result<bool> settle_by_replay(const AssignmentRecord& assignment, const common::WorkUnit& unit,
                                          const common::NamedTensors& base, const std::optional<Committed>& committed,
                                          bool drawn, Verdict& verdict);
    // The samples `unit` trained on, for the probes: the last `max_samples` of its first epoch.
    AssignedSamples assigned_samples(const common::WorkUnit& unit, std::int64_t max_samples) const;
    // The norm bounds, copies and alignment; true when the verdict is a refusal.
    common::Result<bool> cheap_checks(const AssignmentRecord& assignment, const TaskView& task,
                                      const common::WorkUnit& unit, const common::NamedTensors& delta,
                                      const CheckPlan& plan, const std::set<std::string>& suspended, Verdict& verdict);
    // With `answered`, a loss-check unit's losses in place of the server's evaluations.
    common::Status loss_checks(const AssignmentRecord& assignment, const TaskView& task, const common::WorkUnit& unit,
                               const common::NamedTensors& base, const common::NamedTensors& delta,
                               const std::set<std::string>& suspended, Verdict& verdict,
                               const common::LossReport* answered);
    // The loss checks as the plan asks: by the server, or by an answer the server overrules
    // only by its own measurement.
    common::Status planned_loss_checks(const AssignmentRecord& assignment, const TaskView& task,
                                       const common::WorkUnit& unit, const common::NamedTensors& base,
                                       const common::NamedTensors& delta, const std::set<std::string>& suspended,
                                       const CheckPlan& plan, Verdict& verdict);
    // The base model's per-sample held-out losses (cached for the newest model asked).
    common::Result<std::vector<double>> held_out_base_losses(const std::string& task_id,
                                                             const std::string& model_sha256,
                                                             const common::NamedTensors& base, std::int64_t samples);
    // The gain per step a result of `full_rate_steps` on `base_version` must exceed, and where it
    // came from: gain_margin of recent gains and of the current ones (units based within
    // kGainVersions before it, of kComparableSteps of its length or more); before there are
    // kMinFigures, min_gain × the calibration's gain (the lower of its two units').
    struct GainThreshold {
        double value = 0;
        std::string source;
    };
    common::Result<GainThreshold> gain_threshold(const std::string& task_id, const TaskConfig& config,
                                                 std::int64_t base_version, double full_rate_steps);
    // The typical norm or gain per step: the median of recent results, or the calibration's.
    common::Result<std::optional<double>> typical(const std::string& task_id, const std::vector<double>& recent,
                                                  double Calibration::*figure);

    ResultStore& figures_;
    SettingStore& settings_;
    ResultFiles& results_;
    ModelCache& models_;
    ProbePools& probes_;
    const BlobStore& blobs_;
    CopyDetector& copies_;
    CheckCosts& costs_;
    ReplayAudit audit_;
    std::mutex mutex_;  // guards the held-out base-loss cache and the calibrations
    std::string base_loss_key_;
    std::vector<double> base_losses_;
    std::map<std::string, std::optional<Calibration>> calibrations_;
};

}  // namespace tessera::server
