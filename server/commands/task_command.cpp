// `tessera-server task create`: a task from a dataset directory — shards copied into the blob
// store, version 0 built from the preset's seeded initial weights. The other task actions are
// in task_control_command.cpp.
#include <cxxopts.hpp>

#include <optional>

#include "command_line.h"
#include "command_support.h"
#include "commands.h"
#include "task_setup.h"

namespace tessera::server {
namespace {

// --lr-schedule constant|cosine|none (constant when not given) with --schedule-samples,
// --warmup-samples and --final-lr-ratio, after the flags that set H and B.
common::Result<std::optional<common::LrSchedule>> schedule_from_args(const cxxopts::ParseResult& args,
                                                                     const TaskConfig& config) {
    LrScheduleFlags flags;
    if (args.count("lr-schedule")) flags.name = args["lr-schedule"].as<std::string>();
    if (args.count("warmup-samples")) flags.warmup_samples = args["warmup-samples"].as<std::int64_t>();
    if (args.count("schedule-samples")) flags.total_samples = args["schedule-samples"].as<std::int64_t>();
    if (args.count("final-lr-ratio")) flags.final_lr_ratio = args["final-lr-ratio"].as<double>();
    return lr_schedule_from_flags(flags, config);
}

common::Result<TaskConfig> config_from_args(const cxxopts::ParseResult& args, const std::filesystem::path& data_dir) {
    auto policy = policy_from_name(args["policy"].as<std::string>());
    if (!policy) return common::make_error("--policy must be fedasync, fedbuff, diloco or diloco-dn");
    auto defaults = default_task_config(data_dir, *policy, args.count("model") ? args["model"].as<std::string>() : "");
    if (!defaults) return defaults.error();
    TaskConfig c = std::move(*defaults);
    if (args.count("id")) c.task_id = args["id"].as<std::string>();
    if (args.count("staleness")) {
        auto staleness = parse_staleness(args["staleness"].as<std::string>());
        if (!staleness) return staleness.error();
        c.merge.staleness = *staleness;
    }
    if (args.count("server-lr")) c.merge.server_lr = args["server-lr"].as<double>();
    if (args.count("buffer")) c.merge.buffer_size = args["buffer"].as<std::int64_t>();
    if (args.count("trim")) c.merge.trim_fraction = args["trim"].as<double>();
    if (args.count("momentum")) c.merge.momentum = args["momentum"].as<double>();
    if (args.count("per-concurrency")) c.merge.concurrency_exponent = args["per-concurrency"].as<double>();
    if (args.count("clip-norm")) c.merge.clip_norm = args["clip-norm"].as<double>();
    if (args.count("local-steps")) c.local_steps = args["local-steps"].as<std::int64_t>();
    if (args.count("batch")) c.batch_size = args["batch"].as<std::int64_t>();
    if (args.count("lr")) c.lr = args["lr"].as<double>();
    if (args.count("inner-optimizer")) {
        auto kind = common::inner_optimizer_from_name(args["inner-optimizer"].as<std::string>());
        if (!kind) return common::make_error("--inner-optimizer must be fresh or kept");
        c.inner_optimizer = *kind;
    }
    if (args.count("deadline")) {
        auto seconds = parse_duration(args["deadline"].as<std::string>());
        if (!seconds) return seconds.error();
        c.deadline_s = *seconds;
    }
    if (args.count("replication")) c.replication = args["replication"].as<double>();
    if (args.count("loss-check")) c.loss_check = args["loss-check"].as<double>();
    if (args.count("check-samples")) c.check_samples = args["check-samples"].as<std::int64_t>();
    if (args.count("norm-floor")) c.norm_floor = args["norm-floor"].as<double>();
    if (args.count("min-gain")) c.min_gain = args["min-gain"].as<double>();
    if (args.count("copy-similarity")) c.copy_similarity = args["copy-similarity"].as<double>();
    if (args.count("min-alignment")) c.min_alignment = args["min-alignment"].as<double>();
    if (args.count("trust-streak")) c.trust_streak = args["trust-streak"].as<std::int64_t>();
    if (args.count("quarantine-after")) c.quarantine_rejections = args["quarantine-after"].as<std::int64_t>();
    if (args.count("quarantine-window")) {
        auto seconds = parse_duration(args["quarantine-window"].as<std::string>());
        if (!seconds) return seconds.error();
        c.quarantine_window_s = *seconds;
    }
    if (args.count("codec")) {
        auto dtype = common::delta_dtype_from_name(args["codec"].as<std::string>());
        if (!dtype) return common::make_error("--codec must be f32, bf16, int8, int4 or int2");
        c.codec.dtype = *dtype;
    }
    if (args.count("topk")) c.codec.topk_fraction = args["topk"].as<double>();
    if (args.count("patch-codec")) {
        auto patches = parse_patch_codec(args["patch-codec"].as<std::string>());
        if (!patches) return common::with_context("--patch-codec", patches.error());
        c.patches = *patches;
    }
    if (args.count("publish-every")) c.publish_every = args["publish-every"].as<std::int64_t>();
    if (args.count("shards-per-unit")) c.shards_per_unit = args["shards-per-unit"].as<std::int64_t>();
    if (args.count("target-seconds")) c.target_seconds = args["target-seconds"].as<double>();
    auto schedule = schedule_from_args(args, c);
    if (!schedule) return schedule.error();
    c.lr_schedule = *schedule;
    c.min_rounds = args.count("min-rounds") ? args["min-rounds"].as<std::int64_t>() : default_min_rounds(c);
    if (args.count("units-end-together")) c.units_end_together = true;
    if (args.count("max-failures")) c.max_failures = args["max-failures"].as<std::int64_t>();
    if (args.count("max-in-flight")) c.max_in_flight = args["max-in-flight"].as<std::int64_t>();
    if (args.count("requires-device")) c.requires_device = args["requires-device"].as<std::string>();
    if (args.count("min-device-memory")) c.min_device_memory_gb = args["min-device-memory"].as<double>();
    if (args.count("eval-samples")) c.eval_samples = args["eval-samples"].as<std::int64_t>();
    if (args.count("eval-interval")) c.eval_interval_s = args["eval-interval"].as<std::int64_t>();
    if (args.count("eval-full-interval")) c.eval_full_interval_s = args["eval-full-interval"].as<std::int64_t>();
    c.init_seed = args["seed"].as<std::int64_t>();
    if (auto status = validate_task_config(c); !status) return status.error();
    return c;
}

}  // namespace

int task_command(int argc, char** argv) {
    if (argc > 1 && std::string_view(argv[1]) != "create" && !std::string_view(argv[1]).starts_with("-"))
        return task_control_command(argc, argv);
    cxxopts::Options options("tessera-server task create", "Create a training task (docs/operations.md)");
    options.add_options()("action", "create", cxxopts::value<std::string>())("state", "state directory",
                                                                             cxxopts::value<std::string>())(
        "data", "dataset directory (tessera-data prepare --out)", cxxopts::value<std::string>())(
        "id", "task id (default: <dataset>-<model>)", cxxopts::value<std::string>())(
        "model", "preset: dit-tiny, dit-s, dit-b, cnn (default: dit-tiny, cnn for pixels)",
        cxxopts::value<std::string>())("policy", "fedasync, fedbuff, diloco or diloco-dn",
                                       cxxopts::value<std::string>()->default_value("fedasync"))(
        "staleness", "const, poly:A, hinge:A,B or conc:M,A[,R] (default: fedasync poly:1, others poly:0.5)",
        cxxopts::value<std::string>())("server-lr",
                                       "merge step size eta (fedasync 1.0, fedbuff 1.0, diloco and diloco-dn 0.7)",
                                       cxxopts::value<double>())(
        "buffer", "fedbuff K / diloco N: deltas per merge; diloco-dn N: arrivals per momentum step (4)",
        cxxopts::value<std::int64_t>())("trim", "fedbuff trimmed-mean fraction per side, < 0.5 (0)",
                                        cxxopts::value<double>())(
        "momentum", "diloco / diloco-dn outer Nesterov momentum (0.9)", cxxopts::value<double>())(
        "per-concurrency",
        "fedasync: divide each result by C^P, C the concurrency stamped on it (P 0.75 unless "
        "given as =P; =1 divides by C); use with conc:M,A",
        cxxopts::value<double>()->implicit_value("0.75"))("clip-norm", "clip each delta to this L2 norm (0: off)",
                                                          cxxopts::value<double>())(
        "local-steps", "inner steps H per work unit (50)", cxxopts::value<std::int64_t>())(
        "batch", "batch size (64)", cxxopts::value<std::int64_t>())(
        "lr", "inner AdamW learning rate (dit-tiny 4e-3, cnn 1e-3, dit-s and dit-b 3e-4)", cxxopts::value<double>())(
        "inner-optimizer", "fresh: AdamW afresh for every unit; kept: volunteers keep their moments (kept)",
        cxxopts::value<std::string>())(
        "lr-schedule",
        "one learning-rate schedule over the run: constant, cosine, or none: a warm-up in every unit (constant)",
        cxxopts::value<std::string>())("schedule-samples",
                                       "the run's samples: where a cosine ends; sizes units with --min-rounds",
                                       cxxopts::value<std::int64_t>())(
        "warmup-samples", "samples merged over which the lr warms up (two units: 2 x H x batch)",
        cxxopts::value<std::int64_t>())("final-lr-ratio", "cosine: the lr at the end, as a fraction of --lr (0.1)",
                                        cxxopts::value<double>())(
        "deadline", "time a volunteer has per unit, e.g. 30m (30m)", cxxopts::value<std::string>())(
        "replication", "chance a unit is computed twice and compared (0.1)", cxxopts::value<double>())(
        "loss-check", "fraction of a trusted volunteer's results given the loss checks (0.1)",
        cxxopts::value<double>())("check-samples", "samples of each loss check's evaluations (128)",
                                  cxxopts::value<std::int64_t>())(
        "norm-floor", "smallest norm per step, as a fraction of the median (0.1)", cxxopts::value<double>())(
        "min-gain", "smallest gain on the unit's own samples, as a fraction of the median (0.25)",
        cxxopts::value<double>())("copy-similarity", "cosine above which a delta is a copy (0.995)",
                                  cxxopts::value<double>())(
        "min-alignment", "smallest cosine with the consensus of recent results (0.1)", cxxopts::value<double>())(
        "trust-streak", "valid results in a row before a volunteer is trusted (5)", cxxopts::value<std::int64_t>())(
        "quarantine-after", "refusals within the window that quarantine a volunteer (3)",
        cxxopts::value<std::int64_t>())("quarantine-window", "the quarantine rule's window, e.g. 1h (1h)",
                                        cxxopts::value<std::string>())(
        "codec", "delta encoding: f32, bf16, int8, int4, int2 (int4)", cxxopts::value<std::string>())(
        "topk", "fraction of each tensor kept, (0, 1] (1)", cxxopts::value<double>())(
        "patch-codec", "downlink patches between versions: off, bf16, int8, int4, int2 (int2)",
        cxxopts::value<std::string>())("publish-every", "with patches: publish the model every N versions (1)",
                                       cxxopts::value<std::int64_t>())("shards-per-unit", "shards in one work unit (1)",
                                                                       cxxopts::value<std::int64_t>())(
        "target-seconds", "scale H so a unit takes about this long; 0 = off (120)", cxxopts::value<double>())(
        "min-rounds", "lower H so each volunteer gets this many units over --schedule-samples; 0 = off (20 with it)",
        cxxopts::value<std::int64_t>())(
        "units-end-together", "size units as a share of the fastest volunteer's, steps proportional to speed")(
        "max-failures", "failures before a unit is retired (3)", cxxopts::value<std::int64_t>())(
        "max-in-flight", "units one volunteer may hold (2)", cxxopts::value<std::int64_t>())(
        "requires-device", "volunteers that may take its units: any or cuda (any)", cxxopts::value<std::string>())(
        "min-device-memory", "GB of device memory a volunteer needs (0)", cxxopts::value<double>())(
        "weight", "its share of work among the running tasks (1)", cxxopts::value<double>())(
        "eval-samples", "validation samples per evaluation (512)", cxxopts::value<std::int64_t>())(
        "eval-interval", "seconds between validation-curve points (10)", cxxopts::value<std::int64_t>())(
        "eval-full-interval", "seconds between curve points on the whole validation set (300)",
        cxxopts::value<std::int64_t>())("seed", "seed of the initial weights",
                                        cxxopts::value<std::int64_t>()->default_value("0"));
    options.parse_positional({"action"});
    add_database_option(options);
    auto parsed = common::parse_command_line(options, argc, argv);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    if (!args.count("action") || args["action"].as<std::string>() != "create")
        return fail("task", "the actions are create, list, pause, resume, finish and weight");
    if (!args.count("state") || !args.count("data")) return fail("task create", "needs --state DIR and --data DIR");
    StateDir state = state_dir_of(args);
    auto store = Store::connect(state.database_url(), false);
    if (!store) return fail("task create", store.message());
    auto config = config_from_args(args, args["data"].as<std::string>());
    if (!config) return fail("task create", config.message());
    double weight = args.count("weight") ? args["weight"].as<double>() : 1.0;
    if (!(weight >= 0)) return fail("task create", "--weight must be >= 0");
    auto task = create_task(state, **store, *config);
    if (!task) return fail("task create", task.message());
    if (weight != 1.0)
        if (auto status = (*store)->set_task_weight(task->id, weight); !status)
            return fail("task create", status.message());
    auto shards = (*store)->shards(task->id);
    auto version0 = (*store)->version(task->id, 0);
    std::cout << "task " << task->id << ": model " << config->model << ", " << (shards ? shards->size() : 0)
              << " shards, policy " << policy_name(config->merge.kind) << " (" << config->merge.staleness.to_string()
              << "), version 0 " << (version0 && *version0 ? (*version0)->blob_sha256.substr(0, 12) : std::string("?"))
              << "\n";
    return 0;
}

}  // namespace tessera::server
