// TaskConfig defaults, checks and its JSON form.
#include "task_config.h"

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>

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
            // Outer Nesterov (η 0.7, μ 0.9) multiplies a steady pseudo-gradient about 7×: one
            // outer step per arrival diverged, one per 4 arrivals converged (docs/operations.md).
        case PolicyKind::DiLoCoDN:
            // Delayed Nesterov also takes one momentum step per N arrivals (and applies each
            // arrival at once, scaled by ε/N): diloco's outer settings carry over (Liu et al. 2024).
            config.merge.server_lr = 0.7;
            config.merge.momentum = 0.9;
            config.merge.buffer_size = 4;
            config.merge.staleness = {Staleness::Kind::Polynomial, 0.5, 0};
            break;
    }
}

void apply_new_task_defaults(TaskConfig& config) {
    // Kept moments with one run-wide schedule: 1.028x ddp at K = 8 with the checks on, and the
    // scaling series' training at every K (docs/benchmarks.md, "Issue 29's campaign").
    config.inner_optimizer = common::InnerOptimizer::Kept;
    // dit-tiny: central's tuned rate at batch 64, stable on fleets of 1 to 64 (8e-3, fedasync's
    // best at K = 8, spikes at K = 32); cnn: central's best at a constant rate over 8 epochs
    // (docs/benchmarks.md, "The cnn's rate"). dit-s and dit-b keep 3e-4: no rate was measured
    // for them.
    if (config.model == "dit-tiny") config.lr = 4e-3;
    if (config.model == "cnn") config.lr = 1e-3;
}

std::int64_t default_warmup_samples(const TaskConfig& config) {
    return kWarmupUnits * config.local_steps * config.batch_size;
}

common::LrSchedule default_lr_schedule(const TaskConfig& config) {
    common::LrSchedule schedule;
    schedule.kind = common::LrSchedule::Kind::Constant;
    schedule.warmup_samples = default_warmup_samples(config);
    return schedule;
}

common::Result<std::optional<common::LrSchedule>> lr_schedule_from_flags(const LrScheduleFlags& flags,
                                                                         const TaskConfig& config) {
    if (flags.name == "none") {
        if (flags.warmup_samples || flags.total_samples || flags.final_lr_ratio)
            return common::make_error(
                "--lr-schedule none takes no --schedule-samples, --warmup-samples or --final-lr-ratio");
        return std::optional<common::LrSchedule>();
    }
    auto kind = common::lr_schedule_kind_from_name(flags.name);
    if (!kind) return common::make_error("--lr-schedule must be constant, cosine or none");
    common::LrSchedule schedule = default_lr_schedule(config);
    schedule.kind = *kind;
    if (flags.warmup_samples) schedule.warmup_samples = *flags.warmup_samples;
    if (flags.total_samples) schedule.total_samples = *flags.total_samples;
    if (flags.final_lr_ratio) {
        if (*kind != common::LrSchedule::Kind::Cosine)
            return common::make_error("--final-lr-ratio is for --lr-schedule cosine");
        schedule.final_lr_ratio = *flags.final_lr_ratio;
    }
    if (*kind == common::LrSchedule::Kind::Cosine && !flags.total_samples)
        return common::make_error("--lr-schedule cosine needs --schedule-samples (the samples the decay spans)");
    if (auto status = common::validate_lr_schedule(schedule); !status)
        return common::with_context("--lr-schedule", status.error());
    return std::optional<common::LrSchedule>(schedule);
}

std::int64_t default_min_rounds(const TaskConfig& config) {
    return config.lr_schedule && config.lr_schedule->total_samples > 0 ? kDefaultMinRounds : 0;
}

namespace {

// The settings' relations and the ranges with their own messages; the stored form's bounds
// (read_task_config) apply too.
common::Status check_settings(const TaskConfig& c) {
    auto fail = [](const std::string& what) { return common::Status(common::make_error(what)); };
    if (auto status = validate_settings(c.merge); !status) return status;
    if (c.sample_shape.size() != 3) return fail("sample_shape must be [C, H, W]");
    if (c.local_steps < 1 || c.local_steps > 100000) return fail("local steps must be in 1..100000");
    if (c.batch_size < 1 || c.batch_size > 65536) return fail("batch size must be in 1..65536");
    if (!(c.lr > 0 && c.lr <= 10)) return fail("lr must be in (0, 10]");
    if (c.warmup_steps < 0 || !(c.weight_decay >= 0 && c.weight_decay <= 10) || !(c.grad_clip >= 0))
        return fail("warmup, weight decay and grad clip must be >= 0");
    if (!(c.codec.topk_fraction > 0 && c.codec.topk_fraction <= 1)) return fail("top-k fraction must be in (0, 1]");
    if (c.patches && (c.patches->dtype == common::DeltaDType::F32 ||
                      !(c.patches->topk_fraction > 0 && c.patches->topk_fraction <= 1)))
        return fail("patches must be bf16, int8, int4 or int2 with a top-k fraction in (0, 1]");
    if (c.publish_every < 1 || c.publish_every > 10000) return fail("publish every must be in 1..10000 versions");
    if (c.deadline_s < 10) return fail("the deadline must be at least 10 s");
    if (c.shards_per_unit < 1 || c.shards_per_unit > 256) return fail("shards per unit must be in 1..256");
    if (!(c.target_seconds >= 0)) return fail("target seconds must be >= 0");
    if (c.min_rounds < 0 || c.min_rounds > 1000000) return fail("min rounds must be in 0..1000000");
    if (c.min_rounds > 0 && !(c.lr_schedule && c.lr_schedule->total_samples > 0))
        return fail("min rounds needs an lr schedule with its total samples (the run the rounds divide)");
    if (c.max_failures < 1) return fail("max failures must be >= 1");
    if (c.max_in_flight < 1) return fail("max in flight must be >= 1");
    if (c.requires_device != "any" && c.requires_device != "cuda") return fail("requires device must be any or cuda");
    if (!(c.min_device_memory_gb >= 0)) return fail("min device memory must be >= 0 GB");
    if (c.lr_schedule)
        if (auto status = common::validate_lr_schedule(*c.lr_schedule); !status)
            return fail("lr schedule: " + status.message());
    if (!(c.replication >= 0 && c.replication <= 1)) return fail("replication must be in [0, 1]");
    if (!(c.loss_check >= 0 && c.loss_check <= 1)) return fail("loss check fraction must be in [0, 1]");
    if (!(c.replica_tolerance > 0) || !(c.loss_tolerance >= 0) || !(c.norm_bound > 1))
        return fail("replica tolerance must be > 0, loss tolerance >= 0, norm bound > 1");
    if (!(c.norm_floor >= 0 && c.norm_floor < 1)) return fail("norm floor must be in [0, 1)");
    if (!(c.min_gain >= 0 && c.min_gain <= 1)) return fail("min gain must be in [0, 1]");
    if (!(c.copy_similarity > 0 && c.copy_similarity <= 1)) return fail("copy similarity must be in (0, 1]");
    if (!(c.min_alignment >= -1 && c.min_alignment < 1)) return fail("min alignment must be in [-1, 1)");
    if (c.trust_streak < 0 || c.trust_streak > 1000) return fail("trust streak must be in 0..1000");
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

boost::json::value to_json(const TaskConfig& c) {
    boost::json::array shape(c.sample_shape.begin(), c.sample_shape.end());
    return {{"task_id", c.task_id},
            {"model", c.model},
            {"data_dir", c.data_dir},
            {"data_kind", c.data_kind},
            {"sample_shape", shape},
            {"num_classes", c.num_classes},
            {"text_dim", c.text_dim},
            {"init_seed", c.init_seed},
            {"policy", policy_name(c.merge.kind)},
            {"staleness", c.merge.staleness.to_string()},
            {"server_lr", c.merge.server_lr},
            {"clip_norm", c.merge.clip_norm},
            {"buffer_size", c.merge.buffer_size},
            {"trim_fraction", c.merge.trim_fraction},
            {"momentum", c.merge.momentum},
            {"concurrency_exponent", c.merge.concurrency_exponent},
            {"local_steps", c.local_steps},
            {"batch_size", c.batch_size},
            {"lr", c.lr},
            {"warmup_steps", c.warmup_steps},
            {"weight_decay", c.weight_decay},
            {"grad_clip", c.grad_clip},
            {"inner_optimizer", common::inner_optimizer_name(c.inner_optimizer)},
            {"lr_schedule", c.lr_schedule ? boost::json::value(common::lr_schedule_to_json(*c.lr_schedule))
                                          : boost::json::value(nullptr)},
            {"codec", common::delta_dtype_name(c.codec.dtype)},
            {"topk_fraction", c.codec.topk_fraction},
            {"patch_codec", c.patches ? common::delta_dtype_name(c.patches->dtype) : std::string_view("off")},
            {"patch_topk_fraction", c.patches ? c.patches->topk_fraction : 1.0},
            {"publish_every", c.publish_every},
            {"deadline_s", c.deadline_s},
            {"shards_per_unit", c.shards_per_unit},
            {"target_seconds", c.target_seconds},
            {"min_rounds", c.min_rounds},
            {"units_end_together", c.units_end_together},
            {"max_failures", c.max_failures},
            {"max_in_flight", c.max_in_flight},
            {"requires_device", c.requires_device},
            {"min_device_memory_gb", c.min_device_memory_gb},
            {"replication", c.replication},
            {"replica_tolerance", c.replica_tolerance},
            {"loss_check", c.loss_check},
            {"loss_tolerance", c.loss_tolerance},
            {"norm_bound", c.norm_bound},
            {"check_samples", c.check_samples},
            {"norm_floor", c.norm_floor},
            {"min_gain", c.min_gain},
            {"copy_similarity", c.copy_similarity},
            {"min_alignment", c.min_alignment},
            {"trust_streak", c.trust_streak},
            {"quarantine_rejections", c.quarantine_rejections},
            {"quarantine_window_s", c.quarantine_window_s},
            {"eval_samples", c.eval_samples},
            {"eval_interval_s", c.eval_interval_s},
            {"eval_full_interval_s", c.eval_full_interval_s}};
}

namespace {

using common::JsonObjectReader;
constexpr std::int64_t kBig = common::kMaxSafeInteger;

void read_data_fields(JsonObjectReader& r, TaskConfig& c) {
    c.task_id = r.string("task_id", 1, 64);
    c.model = r.string("model", 1, 64);
    c.data_dir = r.string("data_dir", 1);
    c.data_kind = r.one_of("data_kind", {"latents", "pixels"});
    if (const auto* shape = r.field("sample_shape"); shape && shape->is_array())
        for (const auto& d : shape->as_array()) {
            std::int64_t v = 0;
            if (!common::json_to_integer(d, 1, 4096, v)) r.fail("sample_shape: expected positive integers");
            c.sample_shape.push_back(v);
        }
    c.num_classes = r.integer("num_classes", 0, 100000);
    c.text_dim = r.integer("text_dim", 0, 100000);
    c.init_seed = r.integer("init_seed", 0, kBig);
}

void read_merge_fields(JsonObjectReader& r, TaskConfig& c) {
    auto policy = policy_from_name(r.one_of("policy", {"fedasync", "fedbuff", "diloco", "diloco-dn"}));
    if (policy) c.merge.kind = *policy;
    auto staleness_text = r.string("staleness", 1, 64);
    if (!r.failed()) {
        auto staleness = parse_staleness(staleness_text);
        if (staleness)
            c.merge.staleness = *staleness;
        else
            r.fail(staleness.message());
    }
    c.merge.server_lr = r.number("server_lr", 0, 100);
    c.merge.clip_norm = r.number("clip_norm", 0, 1e12);
    c.merge.buffer_size = r.integer("buffer_size", 1, 100000);
    c.merge.trim_fraction = r.number("trim_fraction", 0, 0.5);
    c.merge.momentum = r.number("momentum", 0, 1);
    // Tasks created before it existed apply each result whole; those of 2026-11-26/27 stored
    // per_concurrency (a division by C, the exponent 1).
    if (r.has("concurrency_exponent"))
        c.merge.concurrency_exponent = r.number("concurrency_exponent", 0, 2);
    else if (r.has("per_concurrency") && r.boolean("per_concurrency"))
        c.merge.concurrency_exponent = 1;
}

void read_training_fields(JsonObjectReader& r, TaskConfig& c) {
    c.local_steps = r.integer("local_steps", 1, 100000);
    c.batch_size = r.integer("batch_size", 1, 65536);
    c.lr = r.number("lr", 0, 10);
    c.warmup_steps = r.integer("warmup_steps", 0, 100000);
    c.weight_decay = r.number("weight_decay", 0, 10);
    c.grad_clip = r.number("grad_clip", 0, 1e6);
    // Tasks created before volunteers kept their optimizer state start it afresh.
    if (r.has("inner_optimizer"))
        c.inner_optimizer = common::inner_optimizer_from_name(r.one_of("inner_optimizer", {"fresh", "kept"}))
                                .value_or(common::InnerOptimizer::Fresh);
    // null or absent (tasks from before it existed): no run-wide schedule.
    if (const auto* schedule = r.has("lr_schedule") ? r.field("lr_schedule") : nullptr; schedule && !schedule->is_null())
        c.lr_schedule = common::read_lr_schedule(r, "lr_schedule");
}

// The deltas' and patches' codecs, and how units are cut and sized.
void read_transfer_fields(JsonObjectReader& r, TaskConfig& c) {
    auto dtype = common::delta_dtype_from_name(r.one_of("codec", {"f32", "bf16", "int8", "int4", "int2"}));
    if (dtype) c.codec.dtype = *dtype;
    c.codec.topk_fraction = r.number("topk_fraction", 0, 1);
    // Tasks created before downlink patches existed go on without them.
    c.patches.reset();
    if (r.has("patch_codec")) {
        auto patch_dtype =
            common::delta_dtype_from_name(r.one_of("patch_codec", {"off", "bf16", "int8", "int4", "int2"}));
        auto fraction = r.number("patch_topk_fraction", 0, 1);
        if (patch_dtype) c.patches = common::DeltaEncoding{*patch_dtype, fraction};
        c.publish_every = r.integer("publish_every", 1, 10000);
    }
    c.deadline_s = r.integer("deadline_s", 1, kBig);
    c.shards_per_unit = r.integer("shards_per_unit", 1, 256);
    c.target_seconds = r.number("target_seconds", 0, 1e9);
    // Tasks created before units were sized to the fleet keep H and the time-based sizing.
    if (r.has("min_rounds")) c.min_rounds = r.integer("min_rounds", 0, 1000000);
    if (r.has("units_end_together")) c.units_end_together = r.boolean("units_end_together");
}

// The volunteers' limits, the contribution checks and the evaluations.
void read_check_fields(JsonObjectReader& r, TaskConfig& c) {
    c.max_failures = r.integer("max_failures", 1, 1000);
    c.max_in_flight = r.integer("max_in_flight", 1, 1000);
    // Tasks created before several tasks ran at once take any volunteer.
    if (r.has("requires_device")) c.requires_device = r.one_of("requires_device", {"any", "cuda"});
    if (r.has("min_device_memory_gb")) c.min_device_memory_gb = r.number("min_device_memory_gb", 0, 1e6);
    c.replication = r.number("replication", 0, 1);
    c.replica_tolerance = r.number("replica_tolerance", 0, 100);
    c.loss_check = r.number("loss_check", 0, 1);
    c.loss_tolerance = r.number("loss_tolerance", 0, 100);
    c.norm_bound = r.number("norm_bound", 0, 1e9);
    // Tasks created before the contribution checks existed get their defaults.
    if (r.has("check_samples")) c.check_samples = r.integer("check_samples", 1, 1 << 24);
    if (r.has("norm_floor")) c.norm_floor = r.number("norm_floor", 0, 1);
    if (r.has("min_gain")) c.min_gain = r.number("min_gain", 0, 1);
    if (r.has("copy_similarity")) c.copy_similarity = r.number("copy_similarity", 0, 1);
    if (r.has("min_alignment")) c.min_alignment = r.number("min_alignment", -1, 1);
    if (r.has("trust_streak")) c.trust_streak = r.integer("trust_streak", 0, 1000);
    if (r.has("quarantine_rejections")) c.quarantine_rejections = r.integer("quarantine_rejections", 1, 100000);
    if (r.has("quarantine_window_s")) c.quarantine_window_s = r.integer("quarantine_window_s", 1, kBig);
    c.eval_samples = r.integer("eval_samples", 1, 1 << 24);
    c.eval_interval_s = r.integer("eval_interval_s", 0, kBig);
    // Tasks created before whole-set evaluations existed keep the default.
    if (r.has("eval_full_interval_s")) c.eval_full_interval_s = r.integer("eval_full_interval_s", 0, kBig);
}

// The stored form with its bounds, without check_settings.
common::Result<TaskConfig> read_task_config(const boost::json::value& json) {
    JsonObjectReader r(json, "task");
    TaskConfig c;
    for (auto* read_fields :
         {read_data_fields, read_merge_fields, read_training_fields, read_transfer_fields, read_check_fields})
        read_fields(r, c);
    if (auto status = r.finish(); !status) return status.error();
    return c;
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
            .seed = seed};
}

common::UnitRate unit_rate_of(const common::Hyperparameters& hyper) {
    auto warmup = hyper.optimizer == common::InnerOptimizer::Kept ? 0 : hyper.warmup_steps;
    return {hyper.schedule, hyper.schedule_from, hyper.schedule_to, hyper.local_steps, hyper.batch_size, warmup};
}

}  // namespace tessera::server
