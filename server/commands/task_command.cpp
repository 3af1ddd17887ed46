// `tessera-server task create`: a task from a dataset directory — shards copied into the blob
// store, version 0 built from the preset's seeded initial weights. The other task actions are
// in task_control_command.cpp.
#include <cxxopts.hpp>

#include <cstdio>
#include <optional>
#include <string>

#include "command_line.h"
#include "command_support.h"
#include "commands.h"
#include "expert_group.h"
#include "sha256.h"
#include "task_setup.h"

namespace tessera::server {
namespace {

// --lr-schedule cosine|constant|none (a cosine over kDefaultScheduleEpochs passes over the
// dataset's `train_samples` when not given) with --schedule-samples, --warmup-samples,
// --final-lr-ratio and --min-rounds, after the flags that set H and B; then the model's rate
// for that schedule unless --lr gave one.
common::Status schedule_from_args(const cxxopts::ParseResult& args, std::int64_t train_samples, TaskConfig& c) {
    LrScheduleFlags flags;
    if (args.count("lr-schedule")) flags.name = args["lr-schedule"].as<std::string>();
    if (args.count("warmup-samples")) flags.warmup_samples = args["warmup-samples"].as<std::int64_t>();
    if (args.count("schedule-samples")) flags.total_samples = args["schedule-samples"].as<std::int64_t>();
    if (args.count("final-lr-ratio")) flags.final_lr_ratio = args["final-lr-ratio"].as<double>();
    flags.train_samples = train_samples;
    auto schedule = lr_schedule_from_flags(flags, c);
    if (!schedule) return schedule.error();
    c.lr_schedule = *schedule;
    c.min_rounds = args.count("min-rounds") ? args["min-rounds"].as<std::int64_t>() : default_min_rounds(c);
    if (!args.count("lr")) c.lr = default_lr(c);
    return {};
}

// Sets `field` from option `name` when it was given.
template <class T>
void take(const cxxopts::ParseResult& args, const char* name, T& field) {
    if (args.count(name)) field = args[name].as<T>();
}

// A duration option ("30m", "1h") in seconds, when it was given.
common::Status take_duration(const cxxopts::ParseResult& args, const char* name, std::int64_t& seconds) {
    if (!args.count(name)) return {};
    auto parsed = parse_duration(args[name].as<std::string>());
    if (!parsed) return parsed.error();
    seconds = *parsed;
    return {};
}

common::Status merge_from_args(const cxxopts::ParseResult& args, TaskConfig& c) {
    if (args.count("staleness")) {
        auto staleness = parse_staleness(args["staleness"].as<std::string>());
        if (!staleness) return staleness.error();
        c.merge.staleness = *staleness;
    }
    take(args, "server-lr", c.merge.server_lr);
    take(args, "buffer", c.merge.buffer_size);
    take(args, "trim", c.merge.trim_fraction);
    take(args, "momentum", c.merge.momentum);
    take(args, "per-concurrency", c.merge.concurrency_exponent);
    take(args, "clip-norm", c.merge.clip_norm);
    return {};
}

common::Status training_from_args(const cxxopts::ParseResult& args, TaskConfig& c) {
    take(args, "local-steps", c.local_steps);
    take(args, "batch", c.batch_size);
    take(args, "lr", c.lr);
    take(args, "caption-drop", c.caption_drop);
    take(args, "patch-mask", c.patch_mask);
    take(args, "ema-decay", c.ema_decay);
    if (args.count("inner-optimizer")) {
        auto kind = common::inner_optimizer_from_name(args["inner-optimizer"].as<std::string>());
        if (!kind) return common::make_error("--inner-optimizer must be fresh or kept");
        c.inner_optimizer = *kind;
    }
    take(args, "target-seconds", c.target_seconds);
    if (args.count("units-end-together")) c.units_end_together = true;
    return {};
}

// The contribution checks' settings and the volunteers' limits.
common::Status checks_from_args(const cxxopts::ParseResult& args, TaskConfig& c) {
    if (auto status = take_duration(args, "deadline", c.deadline_s); !status) return status;
    take(args, "replication", c.replication);
    take(args, "loss-check", c.loss_check);
    take(args, "audit", c.audit);
    take(args, "audit-by", c.audit_by);
    take(args, "check-by", c.check_by);
    take(args, "check-samples", c.check_samples);
    take(args, "norm-floor", c.norm_floor);
    take(args, "min-gain", c.min_gain);
    take(args, "copy-similarity", c.copy_similarity);
    take(args, "min-alignment", c.min_alignment);
    take(args, "trust-streak", c.trust_streak);
    take(args, "quarantine-after", c.quarantine_rejections);
    if (auto status = take_duration(args, "quarantine-window", c.quarantine_window_s); !status) return status;
    take(args, "max-failures", c.max_failures);
    take(args, "max-in-flight", c.max_in_flight);
    take(args, "requires-device", c.requires_device);
    take(args, "min-device-memory", c.min_device_memory_gb);
    return {};
}

// What travels: the deltas' and patches' codecs, publication, shards per unit.
common::Status transfers_from_args(const cxxopts::ParseResult& args, TaskConfig& c) {
    if (args.count("codec")) {
        auto dtype = common::delta_dtype_from_name(args["codec"].as<std::string>());
        if (!dtype) return common::make_error("--codec must be f32, bf16, int8, int4 or int2");
        c.codec.dtype = *dtype;
    }
    take(args, "topk", c.codec.topk_fraction);
    if (args.count("patch-codec")) {
        auto patches = parse_patch_codec(args["patch-codec"].as<std::string>());
        if (!patches) return common::with_context("--patch-codec", patches.error());
        c.patches = *patches;
    }
    if (args.count("patch-topk")) {
        if (!c.patches) return common::make_error("--patch-topk needs patches (--patch-codec is off)");
        c.patches->topk_fraction = args["patch-topk"].as<double>();
    }
    take(args, "publish-every", c.publish_every);
    take(args, "catch-up", c.catch_up_states);
    take(args, "shards-per-unit", c.shards_per_unit);
    return {};
}

// A task's config from the flags, for a dataset and a preset ("": the --model flag's, else the
// dataset's default).
common::Result<TaskConfig> config_from_args(const cxxopts::ParseResult& args, const std::filesystem::path& data_dir,
                                            const std::string& preset = "") {
    auto policy = policy_from_name(args["policy"].as<std::string>());
    if (!policy) return common::make_error("--policy must be fedasync, fedbuff, diloco or diloco-dn");
    auto model = !preset.empty() ? preset : args.count("model") ? args["model"].as<std::string>() : "";
    auto defaults = default_task_config(data_dir, *policy, model);
    if (!defaults) return defaults.error();
    TaskConfig c = std::move(*defaults);
    take(args, "id", c.task_id);
    for (auto* from_args : {merge_from_args, training_from_args, checks_from_args, transfers_from_args})
        if (auto status = from_args(args, c); !status) return status.error();
    auto train_samples = dataset_train_samples(data_dir);
    if (!train_samples) return train_samples.error();
    if (auto status = schedule_from_args(args, *train_samples, c); !status) return status.error();
    take(args, "eval-samples", c.eval_samples);
    take(args, "eval-interval", c.eval_interval_s);
    take(args, "eval-full-interval", c.eval_full_interval_s);
    c.init_seed = args["seed"].as<std::int64_t>();
    if (auto status = validate_task_config(c); !status) return status.error();
    if (auto status = check_async_stability(c.merge); !status) return status.error();
    return c;
}

// A help line with the default a new task gets, from TaskConfig itself: "what (value)".
std::string with_default(const std::string& what, double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return what + " (" + text + ")";
}
std::string with_default(const std::string& what, std::int64_t value) {
    return what + " (" + std::to_string(value) + ")";
}

// The options of `task create`, by what they set.
void add_merge_options(cxxopts::Options& options) {
    options.add_options()("policy", "fedasync, fedbuff, diloco or diloco-dn",
                          cxxopts::value<std::string>()->default_value("fedasync"))(
        "staleness", "const, poly:A, hinge:A,B or conc:M,A[,R] (default: fedasync poly:1, others poly:0.5)",
        cxxopts::value<std::string>())("server-lr",
                                       "merge step size eta (fedasync 1.0, fedbuff 1.0, diloco 0.5, diloco-dn 0.7)",
                                       cxxopts::value<double>())(
        "buffer", "fedbuff K / diloco N: deltas per merge; diloco-dn N: arrivals per momentum step (4)",
        cxxopts::value<std::int64_t>())("trim", "fedbuff trimmed-mean fraction per side, < 0.5 (0)",
                                        cxxopts::value<double>())(
        "momentum", "diloco / diloco-dn outer Nesterov momentum (0.5)", cxxopts::value<double>())(
        "per-concurrency",
        "fedasync: divide each result by C^P, C the concurrency stamped on it (P 0.75 unless "
        "given as =P; =1 divides by C); use with conc:M,A",
        cxxopts::value<double>()->implicit_value("0.75"))("clip-norm", "clip each delta to this L2 norm (0: off)",
                                                          cxxopts::value<double>());
}

void add_training_options(cxxopts::Options& options) {
    const TaskConfig d;
    options.add_options()("local-steps", with_default("inner steps H per work unit", d.local_steps),
                          cxxopts::value<std::int64_t>())("batch", with_default("batch size", d.batch_size),
                                                          cxxopts::value<std::int64_t>())(
        "lr",
        "inner AdamW learning rate (under a cosine: dit-tiny[-text] 8e-3, cnn 4e-3; constant: 4e-3, 1e-3; "
        "dit-s and dit-b 3e-4)",
        cxxopts::value<double>())(
        "caption-drop", with_default("text models: chance a caption trains as the null caption", d.caption_drop),
        cxxopts::value<double>())(
        "patch-mask",
        with_default("DiT models: fraction of each sample's patches dropped after the patch mixer "
                     "(MicroDiT's 0.75); 0 = off",
                     d.patch_mask),
        cxxopts::value<double>())(
        "ema-decay", with_default("EMA of the versions for samples and exports; 0 = none", kNewTaskEmaDecay),
        cxxopts::value<double>())("inner-optimizer",
                                  "fresh: AdamW afresh for every unit; kept: volunteers keep their moments (kept)",
                                  cxxopts::value<std::string>())(
        "lr-schedule",
        "one learning-rate schedule over the run: cosine, constant, or none: a warm-up in every unit (cosine; "
        "constant on a dataset too small to decay over)",
        cxxopts::value<std::string>())(
        "schedule-samples",
        "the run's samples: where a cosine ends; sizes units with --min-rounds (" +
            std::to_string(kDefaultScheduleEpochs) + " passes over the dataset for a cosine; none for a constant)",
        cxxopts::value<std::int64_t>())("warmup-samples",
                                        "samples merged over which the lr warms up (two units: 2 x H x batch)",
                                        cxxopts::value<std::int64_t>())(
        "final-lr-ratio", "cosine: the lr at the end, as a fraction of --lr (0.1)", cxxopts::value<double>())(
        "target-seconds", with_default("scale H so a unit takes about this long; 0 = off", d.target_seconds),
        cxxopts::value<double>())("min-rounds",
                                  "lower H so each volunteer gets this many units over --schedule-samples; 0 = off (" +
                                      std::to_string(kDefaultMinRounds) + " with it)",
                                  cxxopts::value<std::int64_t>())(
        "units-end-together", "size units as a share of the fastest volunteer's, steps proportional to speed");
}

void add_check_options(cxxopts::Options& options) {
    const TaskConfig d;
    options.add_options()("deadline", "time a volunteer has per unit, e.g. 30m (30m)", cxxopts::value<std::string>())(
        "replication", with_default("chance a unit is computed twice and compared", d.replication),
        cxxopts::value<double>())(
        "loss-check", with_default("fraction of a trusted volunteer's results given the loss checks", d.loss_check),
        cxxopts::value<double>())("audit",
                                  with_default("fraction of a trusted volunteer's results the server replays (10x for "
                                               "a new volunteer's)",
                                               kNewTaskAudit),
                                  cxxopts::value<double>())(
        "audit-by",
        "who replays a drawn result: server, or volunteers (a trusted volunteer computes its unit again) (" +
            d.audit_by + ")",
        cxxopts::value<std::string>())(
        "check-by",
        "who evaluates a result drawn for the loss checks: server, or volunteers (a trusted volunteer, the server "
        "checking a sample of its answer) (" +
            d.check_by + ")",
        cxxopts::value<std::string>())("check-samples",
                                       with_default("samples of each loss check's evaluations", d.check_samples),
                                       cxxopts::value<std::int64_t>())(
        "norm-floor", with_default("smallest norm per step, as a fraction of the median", d.norm_floor),
        cxxopts::value<double>())(
        "min-gain", with_default("smallest gain on the unit's own samples, as a fraction of the median", d.min_gain),
        cxxopts::value<double>())("copy-similarity",
                                  with_default("cosine above which a delta is a copy", d.copy_similarity),
                                  cxxopts::value<double>())(
        "min-alignment", with_default("smallest cosine with the consensus of recent results", d.min_alignment),
        cxxopts::value<double>())("trust-streak",
                                  with_default("valid results in a row before a volunteer is trusted", d.trust_streak),
                                  cxxopts::value<std::int64_t>())(
        "quarantine-after",
        with_default("refusals within the window that quarantine a volunteer", d.quarantine_rejections),
        cxxopts::value<std::int64_t>())("quarantine-window", "the quarantine rule's window, e.g. 1h (1h)",
                                        cxxopts::value<std::string>())(
        "max-failures", with_default("failures before a unit is retired", d.max_failures),
        cxxopts::value<std::int64_t>())("max-in-flight", with_default("units one volunteer may hold", d.max_in_flight),
                                        cxxopts::value<std::int64_t>())(
        "requires-device", "volunteers that may take its units: any or cuda (" + d.requires_device + ")",
        cxxopts::value<std::string>())("min-device-memory",
                                       with_default("GB of device memory a volunteer needs", d.min_device_memory_gb),
                                       cxxopts::value<double>());
}

void add_transfer_options(cxxopts::Options& options) {
    const TaskConfig d;
    options.add_options()(
        "codec",
        "delta encoding: f32, bf16, int8, int4, int2 (" + std::string(common::delta_dtype_name(d.codec.dtype)) + ")",
        cxxopts::value<std::string>())(
        "topk", with_default("fraction of each tensor kept, (0, 1]", d.codec.topk_fraction), cxxopts::value<double>())(
        "patch-codec",
        "downlink patches between versions: off, bf16, int8, int4, int2 (" +
            std::string(d.patches ? common::delta_dtype_name(d.patches->dtype) : "off") + ")",
        cxxopts::value<std::string>())(
        "patch-topk",
        with_default("fraction of each tensor a patch keeps, (0, 1]", d.patches ? d.patches->topk_fraction : 1.0),
        cxxopts::value<double>())("publish-every",
                                  with_default("with patches: publish the model every N versions", d.publish_every),
                                  cxxopts::value<std::int64_t>())(
        "catch-up",
        with_default("with patches: one patch per unit from the model each volunteer holds, kept for up to N "
                     "volunteers (0: the published chain)",
                     d.catch_up_states),
        cxxopts::value<std::int64_t>())("shards-per-unit", with_default("shards in one work unit", d.shards_per_unit),
                                        cxxopts::value<std::int64_t>());
}

void add_task_options(cxxopts::Options& options) {
    options.add_options()("action", "create", cxxopts::value<std::string>())("state", "state directory",
                                                                             cxxopts::value<std::string>())(
        "data", "dataset directory (tessera-data prepare --out)", cxxopts::value<std::string>())(
        "experts",
        "instead of --data: a tessera-data cluster directory; one task per cluster and a router task "
        "(docs/experts.md)",
        cxxopts::value<std::string>())(
        "id", "task id (default: <dataset>-<model>; with --experts the group's, <source>-<model>-experts<E>)",
        cxxopts::value<std::string>())(
        "model",
        "preset: dit-nano, dit-tiny, dit-s, dit-b (class-conditional latents); dit-nano-text, dit-tiny-text, "
        "dit-s-text, dit-b-text "
        "(captioned latents: text-to-image); cnn (pixels) (default: dit-tiny, dit-tiny-text with captions, cnn for "
        "pixels)",
        cxxopts::value<std::string>());
    add_merge_options(options);
    add_training_options(options);
    add_check_options(options);
    add_transfer_options(options);
    options.add_options()("weight", "its share of work among the running tasks (1)", cxxopts::value<double>())(
        "eval-samples", with_default("validation samples per evaluation", TaskConfig{}.eval_samples),
        cxxopts::value<std::int64_t>())(
        "eval-interval", with_default("seconds between validation-curve points", TaskConfig{}.eval_interval_s),
        cxxopts::value<std::int64_t>())(
        "eval-full-interval",
        with_default("seconds between curve points on the whole validation set", TaskConfig{}.eval_full_interval_s),
        cxxopts::value<std::int64_t>())("seed", "seed of the initial weights",
                                        cxxopts::value<std::int64_t>()->default_value("0"));
}

// The line `task create` prints for a task it made.
void print_created(Store& store, const TaskRecord& task, const TaskConfig& config) {
    auto shards = store.shards(task.id);
    auto version0 = store.version(task.id, 0);
    std::cout << "task " << task.id << ": model " << config.model << ", " << (shards ? shards->size() : 0)
              << " shards, policy " << policy_name(config.merge.kind) << " (" << config.merge.staleness.to_string()
              << "), version 0 "
              << (version0 && *version0 ? common::short_hash((*version0)->blob_sha256) : std::string("?")) << "\n";
}

// `task create --experts DIR`: every member's config is built and checked, and none of their
// ids taken, before the first is created.
int create_expert_group(const cxxopts::ParseResult& args, const StateDir& state, Store& store) {
    auto configure = [&](const std::filesystem::path& data_dir, const std::string& model) {
        return config_from_args(args, data_dir, model);
    };
    auto members =
        plan_expert_group(args["experts"].as<std::string>(), args.count("id") ? args["id"].as<std::string>() : "",
                          args.count("weight") ? args["weight"].as<double>() : 1.0, configure);
    if (!members) return fail("task create", members.message());
    for (const auto& m : *members) {
        auto existing = store.task(m.config.task_id);
        if (!existing) return fail("task create", existing.message());
        if (*existing) return fail("task create", "task " + m.config.task_id + " exists already; nothing was created");
    }
    for (const auto& m : *members) {
        auto task = create_task(state, store, m.config);
        if (!task) return fail("task create", m.config.task_id + ": " + task.message());
        if (auto status = store.set_task_weight(task->id, m.weight); !status)
            return fail("task create", status.message());
        print_created(store, *task, m.config);
    }
    std::cout << "expert group " << members->front().config.expert_group << ": " << members->size() - 1
              << " experts and a router\n";
    return 0;
}

}  // namespace

int task_command(int argc, char** argv) {
    if (argc > 1 && std::string_view(argv[1]) != "create" && !std::string_view(argv[1]).starts_with("-"))
        return task_control_command(argc, argv);
    cxxopts::Options options("tessera-server task create", "Create a training task (docs/operations.md)");
    add_task_options(options);
    options.parse_positional({"action"});
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("action") || args["action"].as<std::string>() != "create")
        return fail("task", "the actions are create, list, pause, resume, finish and weight");
    if (!args.count("state") || args.count("data") + args.count("experts") != 1)
        return fail("task create", "needs --state DIR and one of --data DIR and --experts DIR");
    StateDir state = state_dir_of(args);
    auto store = Store::connect(state.database_url(), false);
    if (!store) return fail("task create", store.message());
    if (args.count("experts")) return create_expert_group(args, state, **store);
    auto config = config_from_args(args, args["data"].as<std::string>());
    if (!config) return fail("task create", config.message());
    double weight = args.count("weight") ? args["weight"].as<double>() : 1.0;
    if (!(weight >= 0)) return fail("task create", "--weight must be >= 0");
    auto task = create_task(state, **store, *config);
    if (!task) return fail("task create", task.message());
    if (weight != 1.0)
        if (auto status = (*store)->set_task_weight(task->id, weight); !status)
            return fail("task create", status.message());
    print_created(**store, *task, *config);
    return 0;
}

}  // namespace tessera::server
