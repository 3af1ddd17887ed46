// A task's configuration: model, dataset, merge policy and scheduling/validation knobs.
// Stored as JSON in the tasks table; `tessera-server task create` fills it from flags
// (docs/operations.md lists every knob and its default).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/value.hpp>

#include "delta_codec.h"
#include "merge_policy.h"
#include "protocol.h"
#include "result.h"

namespace tessera::server {

// The fewest samples a loss check may evaluate (its spread is estimated from them).
constexpr std::int64_t kMinCheckSamples = 16;
// Upper bounds that the check at creation and the stored form's reader both apply (the
// whole numbers; learning rate and weight decay are at most these too).
constexpr std::int64_t kMaxLocalSteps = 100000;
constexpr std::int64_t kMaxBatchSize = 65536;
constexpr std::int64_t kMaxLr = 10;
constexpr std::int64_t kMaxWeightDecay = 10;
constexpr std::int64_t kMaxPublishEvery = 10000;
constexpr std::int64_t kMaxCatchUpStates = 1000000;
constexpr std::int64_t kMaxMinRounds = 1000000;
constexpr std::int64_t kMaxTrustStreak = 1000;
constexpr double kNewTaskEmaDecay = 0.999;
constexpr std::int64_t kRouterIndex = -1;

// A caption clustering read as a Gaussian mixture (common::caption_evidence, docs/experts.md).
struct CaptionClusters {
    std::vector<std::vector<double>> centres;  // experts × text width
    std::vector<std::int64_t> sizes;           // training samples per expert
    double inertia = 0;                        // k-means' summed squared distance
    bool empty() const { return centres.empty(); }
};

struct TaskConfig {
    std::string task_id;
    std::string model;                       // preset name
    std::string data_dir;                    // absolute path of the dataset directory
    std::string data_kind;                   // "latents" or "pixels"
    std::vector<std::int64_t> sample_shape;  // [C, H, W]
    std::int64_t num_classes = 10;
    std::int64_t text_dim = 0;
    std::int64_t init_seed = 0;
    // Decentralized experts (`task create --experts`, docs/experts.md): the group's id, empty for
    // an ordinary task; in a group, the expert's cluster index, or kRouterIndex for the router.
    std::string expert_group;
    std::int64_t expert_index = kRouterIndex;
    // The router's only: each expert's training samples per class (experts × classes, from
    // clusters.json), for routing by the class too; empty when unknown or not a router.
    std::vector<std::vector<std::int64_t>> expert_class_counts;
    // The router's only, for routing by the caption: the clusters' centres on the pooled caption
    // (experts × text width), their training sizes and k-means' inertia (clusters.json made on
    // "text"); empty when the clusters were made on other features or not a router.
    CaptionClusters expert_caption_clusters;

    MergeSettings merge;

    // Inner loop sent to volunteers.
    std::int64_t local_steps = 50;
    std::int64_t batch_size = 64;
    double lr = 3e-4;
    std::int64_t warmup_steps = 5;
    double weight_decay = 0.01;
    double grad_clip = 1.0;
    // Text tasks: the rate at which a unit's captions drop to the model's null caption (the
    // unconditional branch classifier-free guidance needs; PixArt-α's 0.1).
    double caption_drop = 0.1;
    // DiT tasks: the fraction of each sample's patches a unit drops after the model's patch
    // mixer (MicroDiT's deferred masking; the unit's `patch_mask`), in [0, 1); 0: off.
    double patch_mask = 0;
    // The server keeps the EMA of the versions at this decay (server/aggregation/model_ema.h)
    // for samples and exports; 0: none (tasks from before it; new tasks get kNewTaskEmaDecay).
    double ema_decay = 0;
    // kept: volunteers carry their AdamW moments from unit to unit (replicated units stay
    // fresh, so that replicas stay comparable); fresh: every unit starts AdamW afresh.
    common::InnerOptimizer inner_optimizer = common::InnerOptimizer::Fresh;
    // One learning-rate schedule over the run, indexed by samples merged (common/lr_schedule.h),
    // times the per-unit warm-up; none: the per-unit warm-up at a constant lr.
    std::optional<common::LrSchedule> lr_schedule;
    common::DeltaEncoding codec{common::DeltaDType::Int4, 1.0};  // dense int4 (docs/benchmarks.md, "Bandwidth")
    // Downlink: each version is also published as a patch from the previous one, in this
    // encoding, with error feedback on the server (common/model_patch.h); none: volunteers
    // download every version whole.
    std::optional<common::DeltaEncoding> patches = common::DeltaEncoding{common::DeltaDType::Int2, 1.0};
    // With patches: the model is published (new units based on it, a patch sent) every this
    // many versions, so that a volunteer back after many merges needs fewer patches; it costs
    // loss (docs/benchmarks.md, "Downlink patches").
    std::int64_t publish_every = 1;
    // With patches: a volunteer holding an older model gets one catch-up patch per unit, to its
    // own reconstruction of the unit's model, kept for up to this many volunteers
    // (catch_up_patches.h); 0: the published patch chain.
    std::int64_t catch_up_states = 0;

    // Scheduling.
    std::int64_t deadline_s = 1800;
    std::int64_t shards_per_unit = 1;
    double target_seconds = 120;     // local steps scaled so a unit takes about this long; 0 = off
    // With a schedule's total: H lowered so each volunteer gets at least this many units over
    // the run, however many volunteers work (unit_sizing.h); 0 = off.
    std::int64_t min_rounds = 0;
    // Units sized as a share of the fastest volunteer's (steps ∝ speed), so that they end
    // together (DyLU); otherwise by target_seconds alone, at least H/8.
    bool units_end_together = false;
    std::int64_t max_failures = 3;   // a unit that fails this often is retired
    std::int64_t max_in_flight = 2;  // per volunteer
    // Which volunteers can take the task's units: a CUDA device ("cuda") or any, and at least
    // this much device memory (GB; 0: any).
    std::string requires_device = "any";
    double min_device_memory_gb = 0;

    // Validation.
    double replication = 0.1;                // chance that a unit is computed twice and compared
    double replica_tolerance = 0.2;          // relative L2 between replicas
    double loss_check = 0.1;                 // fraction of a trusted volunteer's results given the loss checks
    // Fraction of a trusted volunteer's results replayed by the server (replay_audit.h; new
    // tasks: kNewTaskAudit); a new or quarantined volunteer's, kUntrustedAuditFactor times it.
    double audit = 0;
    // Who replays a drawn result (docs/operations.md, "Audit twins"): "server", or "volunteers":
    // a unit sent with fresh moments is given again to a trusted volunteer, and the two
    // trajectories compared as replicas' are (the server replays kept units, and results whose
    // twin never came).
    std::string audit_by = "server";
    // Who evaluates a result drawn for the loss checks (docs/operations.md, "Loss-check units"):
    // "server", or "volunteers": a trusted volunteer, as a unit of its own, whose answer the
    // server checks on a sample of its rows (the server checks a result nobody answers for).
    std::string check_by = "server";
    std::int64_t check_samples = 128;        // samples of each loss check's evaluations
    double loss_tolerance = 0.1;             // relative: L(θ+Δ) ≤ L(θ)·(1 + tol)
    double norm_bound = 5.0;                 // ‖Δ‖ ≤ k · median of recent accepted norms (per step)
    double norm_floor = 0.1;                 // ‖Δ‖ ≥ floor · that median (per step)
    double min_gain = 0.25;                  // gain on its own samples ≥ this · median gain (per step)
    double copy_similarity = 0.995;          // cosine with a recent update or result above this: a copy
    double min_alignment = 0.05;             // cosine with the consensus of recent results below this: misaligned
    std::int64_t trust_streak = 5;           // valid results in a row before results are sampled
    std::int64_t quarantine_rejections = 3;  // refusals within the window that quarantine a volunteer
    std::int64_t quarantine_window_s = 3600;
    std::int64_t eval_samples = 512;          // validation samples for the loss check and the curve
    std::int64_t eval_interval_s = 10;        // at most one validation-curve point per interval
    std::int64_t eval_full_interval_s = 300;  // a curve point on the whole validation set this often
};

// New tasks replay this fraction of trusted volunteers' results (docs/operations.md, "Replay
// audits"): the replay costs about the unit's training, so ~2 % of the training verified.
constexpr double kNewTaskAudit = 0.02;
constexpr double kUntrustedAuditFactor = 10;

// Defaults that depend on the policy (η, buffer size), applied before flags override them.
void apply_policy_defaults(TaskConfig& config);

// New tasks' defaults where the fleet simulator measured better ones than the struct's
// (docs/operations.md, "Defaults and why"): volunteers keep their AdamW moments, and the
// model's own inner learning rate for the schedule it has (default_lr). The struct keeps the
// older values because a stored task without these fields means them.
void apply_new_task_defaults(TaskConfig& config);
// The model's inner rate, measured by the fleet simulator, for the task's schedule: a fleet
// under a cosine wants about twice what a constant rate can hold (docs/benchmarks.md).
double default_lr(const TaskConfig& config);
// A new task's schedule when the operator names none: a cosine to 0.1x over
// kDefaultScheduleEpochs passes over its training samples (or --schedule-samples), warming up
// over the first kWarmupUnits units' samples (H·B each). After the span the rate stays at 0.1x.
constexpr std::int64_t kWarmupUnits = 2;
constexpr std::int64_t kDefaultScheduleEpochs = 4;
std::int64_t default_warmup_samples(const TaskConfig& config);
// The flags of `task create` and the fleet simulator for the run-wide schedule: a name
// (cosine, constant, or none: a warm-up in every unit; empty: the default) and what overrides
// the default's parts. A cosine without total_samples spans kDefaultScheduleEpochs x
// train_samples (the dataset's); the default, with no final ratio given, is a constant where that
// span would not pass its warm-up (a dataset of a few units).
struct LrScheduleFlags {
    std::string name;
    std::optional<std::int64_t> warmup_samples;
    std::optional<std::int64_t> total_samples;
    std::optional<double> final_lr_ratio;
    std::int64_t train_samples = 0;
};
// The schedule the flags give a task whose H and B are set; named errors for flags that
// contradict each other (none with details, a final ratio off a cosine, a cosine without a span
// or a span no longer than its warm-up).
common::Result<std::optional<common::LrSchedule>> lr_schedule_from_flags(const LrScheduleFlags& flags,
                                                                         const TaskConfig& config);
// Units per volunteer a new task sizes for when its schedule states the run's samples.
constexpr std::int64_t kDefaultMinRounds = 20;
std::int64_t default_min_rounds(const TaskConfig& config);
// Range checks with named errors.
common::Status validate_task_config(const TaskConfig& config);

boost::json::value to_json(const TaskConfig& config);
// The stored form read back with each field's bounds, without the settings' relations that
// task_config_from_json checks as well (task_config_json.cpp).
common::Result<TaskConfig> read_task_config(const boost::json::value& json);
common::Result<TaskConfig> task_config_from_json(const boost::json::value& json);
common::Result<TaskConfig> parse_task_config(std::string_view text);

// "off" or a downlink patch dtype (bf16, int8, int4, int2), dense.
common::Result<std::optional<common::DeltaEncoding>> parse_patch_codec(std::string_view name);
// "30m", "90s", "2h", "45" (seconds) → seconds.
common::Result<std::int64_t> parse_duration(std::string_view text);

// The task's inner loop for a unit of `local_steps` steps and `seed`: batch, learning rate,
// warm-up, weight decay, clipping, fresh optimizer state and no run-wide schedule (the
// scheduler adds those a unit carries).
common::Hyperparameters inner_loop_of(const TaskConfig& config, std::int64_t local_steps, std::int64_t seed);
// A unit's learning rates as the checks count them (common::full_rate_steps): a kept unit
// without its warm-up, which a volunteer resuming its moments skips (all but its first unit).
common::UnitRate unit_rate_of(const common::Hyperparameters& hyper);

}  // namespace tessera::server
