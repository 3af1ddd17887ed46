// A simulated run's task: the dataset's defaults, the flags, the run's policy.
#include "fleet_task_config.h"

#include "delta_codec.h"
#include "merge_policy.h"
#include "protocol.h"
#include "staleness.h"
#include "task_setup.h"

namespace tessera::bench {

// The contribution checks' flags, or none at all (--no-checks).
void apply_check_flags(const cxxopts::ParseResult& a, server::TaskConfig& config) {
    if (a.count("replication")) config.replication = a["replication"].as<double>();
    if (a.count("loss-check")) config.loss_check = a["loss-check"].as<double>();
    if (a.count("audit")) config.audit = a["audit"].as<double>();
    if (a.count("audit-by")) config.audit_by = a["audit-by"].as<std::string>();
    if (a.count("check-by")) config.check_by = a["check-by"].as<std::string>();
    if (a.count("trust-streak")) config.trust_streak = a["trust-streak"].as<std::int64_t>();
    if (a.count("no-checks")) {
        // The merging and the codec alone: nothing replicated, loss-checked, bounded or compared.
        config.replication = 0;
        config.loss_check = 0;
        config.audit = 0;
        config.trust_streak = 0;
        config.norm_bound = 1e9;
        config.norm_floor = 0;
        config.copy_similarity = 1;
        config.min_alignment = -1;
    }
}

common::Result<server::TaskConfig> base_config(const CommandOptions& o, server::PolicyKind policy) {
    auto config = server::default_task_config(o.data, policy, o.model);
    if (!config) return config.error();
    const auto& a = o.args;
    if (a.count("local-steps")) config->local_steps = a["local-steps"].as<std::int64_t>();
    if (a.count("batch")) config->batch_size = a["batch"].as<std::int64_t>();
    if (a.count("lr")) config->lr = a["lr"].as<double>();
    if (a.count("grad-clip")) config->grad_clip = a["grad-clip"].as<double>();
    if (a.count("target-seconds")) config->target_seconds = a["target-seconds"].as<double>();
    if (a.count("units-end-together")) config->units_end_together = true;
    if (a.count("deadline")) config->deadline_s = a["deadline"].as<std::int64_t>();
    if (a.count("codec")) {
        auto dtype = common::delta_dtype_from_name(a["codec"].as<std::string>());
        if (!dtype) return common::make_error("--codec: f32, bf16, int8, int4 or int2");
        config->codec.dtype = *dtype;
    }
    if (a.count("topk")) config->codec.topk_fraction = a["topk"].as<double>();
    if (a.count("patch-codec")) {
        auto patches = server::parse_patch_codec(a["patch-codec"].as<std::string>());
        if (!patches) return common::with_context("--patch-codec", patches.error());
        config->patches = *patches;
    }
    if (a.count("patch-topk") && config->patches) config->patches->topk_fraction = a["patch-topk"].as<double>();
    if (a.count("publish-every")) config->publish_every = a["publish-every"].as<std::int64_t>();
    if (a.count("catch-up")) config->catch_up_states = a["catch-up"].as<std::int64_t>();
    if (a.count("inner-state"))
        config->inner_optimizer =
            common::inner_optimizer_from_name(a["inner-state"].as<std::string>()).value_or(config->inner_optimizer);
    // As `task create`: a cosine unless a schedule is named, warming up over two units unless
    // told; every schedule but none spans the samples budget or --schedule-samples (runs that go
    // on past it stay at a cosine's final ratio); then the model's rate for it unless --lr gave one.
    server::LrScheduleFlags flags;
    if (a.count("warmup-samples")) flags.warmup_samples = a["warmup-samples"].as<std::int64_t>();
    if (a.count("lr-schedule")) flags.name = a["lr-schedule"].as<std::string>();
    if (flags.name != "none")
        flags.total_samples = o.schedule_samples > 0
                                  ? o.schedule_samples
                                  : a[a.count("schedule-samples") ? "schedule-samples" : "samples"].as<std::int64_t>();
    if (a.count("final-lr-ratio")) flags.final_lr_ratio = a["final-lr-ratio"].as<double>();
    auto schedule = server::lr_schedule_from_flags(flags, *config);
    if (!schedule) return schedule.error();
    config->lr_schedule = *schedule;
    config->min_rounds =
        a.count("min-rounds") ? a["min-rounds"].as<std::int64_t>() : server::default_min_rounds(*config);
    if (!a.count("lr")) config->lr = server::default_lr(*config);
    apply_check_flags(a, *config);
    return config;
}

common::Result<server::TaskConfig> config_for(const CommandOptions& o, const std::string& run, std::int64_t k,
                                              bool& synchronous) {
    synchronous = run.rfind("sync-", 0) == 0;
    std::string policy_name = synchronous ? (run == "sync-fedavg"   ? "fedbuff"
                                             : run == "sync-diloco" ? "diloco"
                                                                    : "")
                                          : run;
    auto policy = server::policy_from_name(policy_name);
    if (!policy)
        return common::make_error("unknown run '" + run +
                                  "' (central, ddp, sync-fedavg, sync-diloco, fedasync, fedbuff, diloco, diloco-dn)");
    auto config = base_config(o, *policy);
    if (!config) return config.error();
    auto& merge = config->merge;
    if (synchronous) {
        merge.buffer_size = k;
        merge.staleness = {};
        merge.server_lr = *policy == server::PolicyKind::FedBuff ? 1.0 : 0.7;
        config->target_seconds = 0;
        config->replication = 0;
    } else {
        if (o.eta > 0) merge.server_lr = o.eta;
        if (o.buffer > 0 && *policy != server::PolicyKind::FedAsync) merge.buffer_size = o.buffer;
        if (o.momentum >= 0) merge.momentum = o.momentum;
        if (o.args.count("per-concurrency")) merge.concurrency_exponent = o.args["per-concurrency"].as<double>();
        if (!o.staleness.empty()) {
            auto staleness = server::parse_staleness(o.staleness);
            if (!staleness) return staleness.error();
            merge.staleness = *staleness;
        }
        // As `task create`: a diloco step that diverges on late pseudo-gradients is refused.
        if (auto status = server::check_async_stability(merge); !status) return status.error();
    }
    if (auto status = server::validate_task_config(*config); !status) return status.error();
    return config;
}

}  // namespace tessera::bench
