// TaskConfig defaults, checks and parsing; its stored JSON form is in task_config_json.cpp.
#include "task_config.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "expert_clusters.h"
#include "json_strict.h"
#include "lr_schedule_json.h"
#include "protocol.h"

namespace tessera::server {

void apply_policy_defaults(TaskConfig& config) {
    switch (config.merge.kind) {
        case PolicyKind::FedAsync:
            // η = 1 with (1+τ)^−1 rather than FedAsync's η ≈ 0.5 with ^−0.5: on the fleet
            // simulator's home fleet (docs/benchmarks.md) this reached 0.69 at K = 8 and 1.18 at
            // K = 32 where η = 0.5 reached 0.78 and 1.46, and η = 1 is exact at τ = 0.
            config.merge.server_lr = 1.0;
            config.merge.buffer_size = 1;
            config.merge.staleness = {Staleness::Kind::Polynomial, 1.0, 0};
            break;
        case PolicyKind::FedBuff:
            config.merge.server_lr = 1.0;
            config.merge.buffer_size = 4;  // K = 8, home fleet: buffer 2 reached 1.09, buffer 4 0.94
            config.merge.staleness = {Staleness::Kind::Polynomial, 0.5, 0};
            break;
        case PolicyKind::DiLoCo:
            // Not DiLoCo's synchronous η 0.7, μ 0.9: pseudo-gradients that arrive an outer step
            // late make that step diverge (check_async_stability refuses it; at K = 8 on the
            // home fleet it reached 8.0). η 0.5, μ 0.5 moves a steady pseudo-gradient as far as
            // fedbuff's η 1 (η/(1 − μ) = 1) and stays within the delayed-step limit
            // (docs/operations.md, "diloco's outer step"; docs/benchmarks.md, "Divergence guard").
            config.merge.server_lr = 0.5;
            config.merge.momentum = 0.5;
            config.merge.buffer_size = 4;
            config.merge.staleness = {Staleness::Kind::Polynomial, 0.5, 0};
            break;
        case PolicyKind::DiLoCoDN:
            // Delayed Nesterov takes one momentum step per N arrivals and applies each arrival at
            // once, scaled by ε/N (Liu et al. 2024). β 0.9 blew up at K = 8 (6.3 at 45 000
            // samples); β 0.5 was the campaign's, 1.043x ddp (docs/benchmarks.md).
            config.merge.server_lr = 0.7;
            config.merge.momentum = 0.5;
            config.merge.buffer_size = 4;
            config.merge.staleness = {Staleness::Kind::Polynomial, 0.5, 0};
            break;
    }
}

void apply_new_task_defaults(TaskConfig& config) {
    // Kept moments with one run-wide schedule: 1.028x ddp at K = 8 with the checks on, and the
    // scaling series' training at every K (docs/benchmarks.md, "Issue 29's campaign").
    config.inner_optimizer = common::InnerOptimizer::Kept;
    config.lr = default_lr(config);
    // The EMA of the versions for samples and exports, at AT-1's decay (with the warm-up of
    // model_ema.h).
    config.ema_decay = kNewTaskEmaDecay;
    config.audit = kNewTaskAudit;
}

double default_lr(const TaskConfig& config) {
    const bool cosine = config.lr_schedule && config.lr_schedule->kind == common::LrSchedule::Kind::Cosine;
    // Under a cosine over the run: dit-tiny 1.1e-2, the K = 8 fleet within 1.03x of ddp's best
    // on two seeds, 0 of 253 real clients' results refused with the 0.05 alignment floor;
    // dit-tiny-text 8e-3, as 1.1e-2 refused 1.9 % (norm_too_large) on the text task. At a
    // constant rate 4e-3, central's, as 8e-3 spiked at K = 32 (docs/benchmarks.md, "The defaults:
    // a cosine at the fleet's rate", "The alignment floor at 0.05").
    if (config.model == "dit-tiny") return cosine ? 1.1e-2 : 4e-3;
    // dit-nano (a quarter-size expert): dit-tiny's rates, not measured for it.
    if (config.model == "dit-nano") return cosine ? 1.1e-2 : 4e-3;
    if (config.model == "dit-tiny-text") return cosine ? 8e-3 : 4e-3;
    // dit-nano-text (a quarter-size text expert): dit-tiny-text's rates, not measured for it.
    if (config.model == "dit-nano-text") return cosine ? 8e-3 : 4e-3;
    // cnn: under a cosine 4e-3, the K = 8 fleet's best at 8 epochs; constant 1e-3, central's
    // best (docs/benchmarks.md, "The cnn's rate").
    if (config.model == "cnn") return cosine ? 4e-3 : 1e-3;
    // router: a classifier like the cnn, given the cnn's rates (not measured for it).
    if (config.model == "router") return cosine ? 4e-3 : 1e-3;
    return 3e-4;  // dit-s and dit-b: no rate was measured for them
}

std::int64_t default_warmup_samples(const TaskConfig& config) {
    return kWarmupUnits * config.local_steps * config.batch_size;
}

common::Result<std::optional<common::LrSchedule>> lr_schedule_from_flags(const LrScheduleFlags& flags,
                                                                         const TaskConfig& config) {
    if (flags.name == "none") {
        if (flags.warmup_samples || flags.total_samples || flags.final_lr_ratio)
            return common::make_error(
                "--lr-schedule none takes no --schedule-samples, --warmup-samples or --final-lr-ratio");
        return std::optional<common::LrSchedule>();
    }
    auto kind = common::lr_schedule_kind_from_name(flags.name.empty() ? "cosine" : flags.name);
    if (!kind) return common::make_error("--lr-schedule must be constant, cosine or none");
    common::LrSchedule schedule;
    schedule.kind = *kind;
    schedule.warmup_samples = flags.warmup_samples.value_or(default_warmup_samples(config));
    if (flags.total_samples) schedule.total_samples = *flags.total_samples;
    if (flags.final_lr_ratio) {
        if (*kind != common::LrSchedule::Kind::Cosine)
            return common::make_error("--final-lr-ratio is for --lr-schedule cosine");
        schedule.final_lr_ratio = *flags.final_lr_ratio;
    }
    if (*kind == common::LrSchedule::Kind::Cosine) {
        if (!flags.total_samples) schedule.total_samples = kDefaultScheduleEpochs * flags.train_samples;
        if (flags.name.empty() && !flags.final_lr_ratio && schedule.total_samples <= schedule.warmup_samples) {
            // The default on too few samples to decay over: a constant rate (over the span given).
            schedule.kind = common::LrSchedule::Kind::Constant;
            if (!flags.total_samples) schedule.total_samples = 0;
        } else if (schedule.total_samples <= 0) {
            return common::make_error("--lr-schedule cosine needs --schedule-samples (the samples the decay spans)");
        }
    }
    if (auto status = common::validate_lr_schedule(schedule); !status)
        return common::with_context("--lr-schedule", status.error());
    return std::optional<common::LrSchedule>(schedule);
}

std::int64_t default_min_rounds(const TaskConfig& config) {
    return config.lr_schedule && config.lr_schedule->total_samples > 0 ? kDefaultMinRounds : 0;
}

namespace {

// The router's caption clusters: a centre of one width and a positive size per expert, and an
// inertia that gives the mixture a variance (common::caption_evidence).
common::Status check_caption_clusters(const TaskConfig& c) {
    const auto& clusters = c.expert_caption_clusters;
    if (clusters.empty())
        return clusters.sizes.empty() ? common::Status{}
                                      : common::make_error("caption clusters' sizes without centres");
    if (c.expert_index != kRouterIndex) return common::make_error("only a group's router holds the caption clusters");
    if (static_cast<std::int64_t>(clusters.centres.size()) != c.num_classes ||
        clusters.sizes.size() != clusters.centres.size())
        return common::make_error("expert_caption_clusters needs a centre and a size per expert (" +
                                  std::to_string(c.num_classes) + ")");
    for (std::size_t k = 0; k < clusters.centres.size(); ++k) {
        if (clusters.centres[k].empty() || clusters.centres[k].size() != clusters.centres.front().size())
            return common::make_error("expert_caption_clusters' centres must have one width");
        if (clusters.sizes[k] <= 0)
            return common::make_error("expert_caption_clusters: cluster " + std::to_string(k) + " is empty");
    }
    if (!(clusters.inertia > 0) || !std::isfinite(clusters.inertia))
        return common::make_error("expert_caption_clusters' inertia must be positive (it gives the clusters' spread)");
    return {};
}

// An expert group's member: an expert of an index below the group's size, or its router.
common::Status check_expert_fields(const TaskConfig& c) {
    if (c.expert_group.empty()) {
        if (c.expert_index != kRouterIndex) return common::make_error("an expert index needs an expert group");
        if (!c.expert_class_counts.empty()) return common::make_error("class counts need an expert group");
        if (!c.expert_caption_clusters.empty()) return common::make_error("caption clusters need an expert group");
        return {};
    }
    if (c.expert_index < kRouterIndex || c.expert_index >= common::kMaxExperts)
        return common::make_error("the expert index must be in -1.." + std::to_string(common::kMaxExperts - 1) +
                                  " (-1: the router)");
    if ((c.expert_index == kRouterIndex) != (c.model == "router"))
        return common::make_error("in an expert group the router task, and only it, trains the router preset");
    if (auto status = check_caption_clusters(c); !status) return status;
    if (c.expert_class_counts.empty()) return {};
    if (c.expert_index != kRouterIndex) return common::make_error("only a group's router holds the class counts");
    // The router's classes are the experts: one row each, the same classes in every row.
    if (static_cast<std::int64_t>(c.expert_class_counts.size()) != c.num_classes)
        return common::make_error("expert_class_counts needs a row per expert (" + std::to_string(c.num_classes) + ")");
    for (const auto& row : c.expert_class_counts)
        if (row.empty() || row.size() != c.expert_class_counts.front().size())
            return common::make_error("expert_class_counts rows must count the same classes");
    return {};
}

// Who computes a task's drawn audits or loss checks: one the settings know.
bool by_known(const std::string& who) { return who == "server" || who == "volunteers"; }

// The settings' relations and the ranges with their own messages; the stored form's bounds
// (read_task_config) apply too.
common::Status check_settings(const TaskConfig& c) {
    auto fail = [](const std::string& what) { return common::Status(common::make_error(what)); };
    if (auto status = validate_settings(c.merge); !status) return status;
    if (auto status = check_expert_fields(c); !status) return status;
    if (c.sample_shape.size() != 3) return fail("sample_shape must be [C, H, W]");
    if (c.local_steps < 1 || c.local_steps > kMaxLocalSteps)
        return fail("local steps must be in 1.." + std::to_string(kMaxLocalSteps));
    if (c.batch_size < 1 || c.batch_size > kMaxBatchSize)
        return fail("batch size must be in 1.." + std::to_string(kMaxBatchSize));
    if (!(c.lr > 0 && c.lr <= kMaxLr)) return fail("lr must be in (0, " + std::to_string(kMaxLr) + "]");
    if (c.warmup_steps < 0 || !(c.weight_decay >= 0 && c.weight_decay <= kMaxWeightDecay) || !(c.grad_clip >= 0))
        return fail("warmup, weight decay and grad clip must be >= 0");
    if (!(c.caption_drop >= 0 && c.caption_drop <= 1)) return fail("caption drop must be in [0, 1]");
    if (!(c.patch_mask >= 0 && c.patch_mask < 1)) return fail("patch mask must be in [0, 1)");
    if (c.patch_mask > 0 && c.model == "cnn") return fail("patch masking needs a DiT preset: the cnn has no patches");
    if (!(c.ema_decay >= 0 && c.ema_decay < 1)) return fail("ema decay must be in [0, 1) (0: no EMA)");
    if (!(c.codec.topk_fraction > 0 && c.codec.topk_fraction <= 1)) return fail("top-k fraction must be in (0, 1]");
    if (c.patches && (c.patches->dtype == common::DeltaDType::F32 ||
                      !(c.patches->topk_fraction > 0 && c.patches->topk_fraction <= 1)))
        return fail("patches must be bf16, int8, int4 or int2 with a top-k fraction in (0, 1]");
    if (c.publish_every < 1 || c.publish_every > kMaxPublishEvery)
        return fail("publish every must be in 1.." + std::to_string(kMaxPublishEvery) + " versions");
    if (c.catch_up_states < 0 || c.catch_up_states > kMaxCatchUpStates)
        return fail("catch-up states must be in 0.." + std::to_string(kMaxCatchUpStates));
    if (c.catch_up_states > 0 && !c.patches) return fail("catch-up patches need a patch codec");
    if (c.deadline_s < 10) return fail("the deadline must be at least 10 s");
    if (c.shards_per_unit < 1 || c.shards_per_unit > static_cast<std::int64_t>(common::kMaxShardsPerWorkUnit))
        return fail("shards per unit must be in 1.." + std::to_string(common::kMaxShardsPerWorkUnit));
    if (!(c.target_seconds >= 0)) return fail("target seconds must be >= 0");
    if (c.min_rounds < 0 || c.min_rounds > kMaxMinRounds)
        return fail("min rounds must be in 0.." + std::to_string(kMaxMinRounds));
    if (c.min_rounds > 0 && !(c.lr_schedule && c.lr_schedule->total_samples > 0))
        return fail("min rounds needs an lr schedule with its total samples (the run the rounds divide)");
    if (c.max_failures < 1 || c.max_in_flight < 1) return fail("max failures and max in flight must be >= 1");
    if (c.requires_device != "any" && c.requires_device != "cuda") return fail("requires device must be any or cuda");
    if (!(c.min_device_memory_gb >= 0)) return fail("min device memory must be >= 0 GB");
    if (c.lr_schedule)
        if (auto status = common::validate_lr_schedule(*c.lr_schedule); !status)
            return fail("lr schedule: " + status.message());
    if (!(c.replication >= 0 && c.replication <= 1)) return fail("replication must be in [0, 1]");
    if (!(c.loss_check >= 0 && c.loss_check <= 1)) return fail("loss check fraction must be in [0, 1]");
    if (!(c.audit >= 0 && c.audit <= 1)) return fail("audit fraction must be in [0, 1]");
    if (!by_known(c.audit_by) || !by_known(c.check_by)) return fail("audit by, check by must be server or volunteers");
    if (!(c.replica_tolerance > 0) || !(c.loss_tolerance >= 0) || !(c.norm_bound > 1))
        return fail("replica tolerance must be > 0, loss tolerance >= 0, norm bound > 1");
    if (!(c.norm_floor >= 0 && c.norm_floor < 1)) return fail("norm floor must be in [0, 1)");
    if (!(c.min_gain >= 0 && c.min_gain <= 1)) return fail("min gain must be in [0, 1]");
    if (!(c.copy_similarity > 0 && c.copy_similarity <= 1)) return fail("copy similarity must be in (0, 1]");
    if (!(c.min_alignment >= -1 && c.min_alignment < 1)) return fail("min alignment must be in [-1, 1)");
    if (c.trust_streak < 0 || c.trust_streak > kMaxTrustStreak)
        return fail("trust streak must be in 0.." + std::to_string(kMaxTrustStreak));
    if (c.quarantine_rejections < 1 || c.quarantine_window_s < 1)
        return fail("quarantine rejections and window must be >= 1");
    if (c.eval_samples < 1 || c.eval_interval_s < 0 || c.eval_full_interval_s < 0)
        return fail("eval samples must be >= 1, intervals >= 0");
    // The paired loss checks estimate their spread from the samples (paired_losses.h).
    if (c.check_samples < kMinCheckSamples)
        return fail("check samples must be >= " + std::to_string(kMinCheckSamples));
    return {};
}

}  // namespace

common::Status validate_task_config(const TaskConfig& c) {
    if (auto status = check_settings(c); !status) return status;
    // One set of bounds: a task must load from the form it is stored in, or it could be created
    // and never served again.
    if (auto stored = read_task_config(to_json(c)); !stored)
        return common::with_context("out of the bounds a task is stored with", stored.error());
    return {};
}

common::Result<TaskConfig> task_config_from_json(const boost::json::value& json) {
    auto c = read_task_config(json);
    if (!c) return c.error();
    if (auto status = check_settings(*c); !status) return status.error();
    return c;
}

common::Result<TaskConfig> parse_task_config(std::string_view text) {
    auto json = common::parse_json_strict(text);
    if (!json) return json.error();
    return task_config_from_json(*json);
}

common::Result<std::optional<common::DeltaEncoding>> parse_patch_codec(std::string_view name) {
    if (name == "off") return std::optional<common::DeltaEncoding>();
    auto dtype = common::delta_dtype_from_name(name);
    if (!dtype || *dtype == common::DeltaDType::F32)
        return common::make_error("expected off, bf16, int8, int4 or int2, not '" + std::string(name) + "'");
    return std::optional<common::DeltaEncoding>(common::DeltaEncoding{*dtype, 1.0});
}

common::Result<std::int64_t> parse_duration(std::string_view text) {
    std::int64_t unit = 1;
    std::string_view digits = text;
    if (!text.empty()) {
        switch (text.back()) {
            case 's':
                unit = 1;
                digits.remove_suffix(1);
                break;
            case 'm':
                unit = 60;
                digits.remove_suffix(1);
                break;
            case 'h':
                unit = 3600;
                digits.remove_suffix(1);
                break;
            default: break;
        }
    }
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || value <= 0 ||
        value > 1'000'000'000)
        return common::make_error("bad duration '" + std::string(text) + "': expected e.g. 90s, 30m, 2h");
    return value * unit;
}

common::Hyperparameters inner_loop_of(const TaskConfig& config, std::int64_t local_steps, std::int64_t seed) {
    return {.local_steps = local_steps,
            .batch_size = config.batch_size,
            .lr = config.lr,
            .warmup_steps = config.warmup_steps,
            .weight_decay = config.weight_decay,
            .grad_clip = config.grad_clip,
            .seed = seed,
            .caption_drop = config.text_dim > 0 ? std::optional<double>(config.caption_drop) : std::nullopt,
            .patch_mask = config.patch_mask};
}

common::UnitRate unit_rate_of(const common::Hyperparameters& hyper) {
    auto warmup = hyper.optimizer == common::InnerOptimizer::Kept ? 0 : hyper.warmup_steps;
    return {hyper.schedule, hyper.schedule_from, hyper.schedule_to, hyper.local_steps, hyper.batch_size, warmup};
}

}  // namespace tessera::server
