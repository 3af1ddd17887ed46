// `tessera-bench fleet`'s options (docs/fleet_simulator.md lists them) and their checks.
#include "fleet_command_line.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "protocol.h"

namespace tessera::bench {

std::vector<std::string> split(const std::string& text) {
    std::vector<std::string> parts;
    std::stringstream stream(text);
    for (std::string part; std::getline(stream, part, ',');)
        if (!part.empty()) parts.push_back(part);
    return parts;
}

namespace {

// "1,3,5" → {1, 3, 5}; each scale in [0, 100].
common::Result<std::vector<double>> parse_guidances(const std::string& text) {
    std::vector<double> scales;
    for (const auto& part : split(text)) {
        double scale = -1;
        auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), scale);
        if (error != std::errc{} || end != part.data() + part.size() || !(scale >= 0 && scale <= 100))
            return common::make_error("expected guidance scales in [0, 100], got '" + part + "'");
        scales.push_back(scale);
    }
    if (scales.empty()) return common::make_error("no guidance scale");
    return scales;
}

// "central=4e-3,fedasync=8e-3" → {central: 4e-3, fedasync: 8e-3}; each rate in (0, 10].
common::Result<std::map<std::string, double>> parse_run_lrs(const std::string& text) {
    std::map<std::string, double> rates;
    for (const auto& part : split(text)) {
        auto equals = part.find('=');
        if (equals == std::string::npos || equals == 0)
            return common::make_error("expected RUN=LR, got '" + part + "'");
        double lr = 0;
        auto value = std::string_view(part).substr(equals + 1);
        auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), lr);
        if (error != std::errc() || end != value.data() + value.size() || !(lr > 0 && lr <= 10))
            return common::make_error("'" + part + "': the rate must be a number in (0, 10]");
        rates[part.substr(0, equals)] = lr;
    }
    return rates;
}

// The fleet, the runs and their measurement.
void add_run_options(cxxopts::Options& options) {
    options.add_options()("data", "dataset directory (tessera-data prepare)", cxxopts::value<std::string>())(
        "fleet", "preset (uniform, home, churn, hostile) or a fleet JSON file",
        cxxopts::value<std::string>()->default_value("home"))("volunteers", "volunteers of a preset fleet (K)",
                                                              cxxopts::value<std::int64_t>()->default_value("8"))(
        "runs", "comma-separated: central, ddp, sync-fedavg, sync-diloco, fedasync, fedbuff, diloco, diloco-dn",
        cxxopts::value<std::string>()->default_value("central,ddp,sync-fedavg,fedasync,fedbuff,diloco-dn"))(
        "samples", "samples budget of every run", cxxopts::value<std::int64_t>()->default_value("100000"))(
        "points", "validation evaluations per run", cxxopts::value<std::int64_t>()->default_value("10"))(
        "spacing", "curve points spaced in samples: even, or geometric from budget/1000",
        cxxopts::value<std::string>()->default_value("even"))(
        "eval-samples", "validation samples per curve point (0: all; final figures use all)",
        cxxopts::value<std::int64_t>()->default_value("2000"))(
        "target-loss", "loss for time-to-target (0: sync's final loss, else central's)",
        cxxopts::value<double>()->default_value("0"))(
        "overrun", "runs after sync go on past the budget towards the target, up to this multiple of it",
        cxxopts::value<double>()->default_value("3"))("base-speed", "samples/s of a preset's fastest class (RTX 4090)",
                                                      cxxopts::value<double>()->default_value("100"))(
        "seed", "seed of the fleet, the scheduler and the validator",
        cxxopts::value<std::uint64_t>()->default_value("1"))("threads", "LibTorch CPU threads",
                                                             cxxopts::value<int>()->default_value("2"))(
        "tick", "transitioner period, virtual seconds", cxxopts::value<double>()->default_value("10"))(
        "out", "output directory (curves.csv, summary.csv, checks.csv)",
        cxxopts::value<std::string>()->default_value("fleet-out"))("model", "model preset (default: the dataset's)",
                                                                   cxxopts::value<std::string>()->default_value(""));
}

// The task the async runs train: its hyperparameters, checks, codecs and merging.
void add_task_options(cxxopts::Options& options) {
    options.add_options()("local-steps", "H", cxxopts::value<std::int64_t>())("batch", "batch size",
                                                                              cxxopts::value<std::int64_t>())(
        "lr", "inner learning rate (the model's for its schedule, as task create)", cxxopts::value<double>())(
        "grad-clip", "max global gradient norm of every step (the task's 1; 0: off)", cxxopts::value<double>())(
        "target-seconds", "unit length the scheduler sizes H for (0: fixed H)", cxxopts::value<double>())(
        "min-rounds", "lower H so each volunteer gets this many units over the schedule's span (20 with one; 0: off)",
        cxxopts::value<std::int64_t>())(
        "units-end-together", "units sized as a share of the fastest volunteer's (steps proportional to speed)")(
        "deadline", "unit deadline, seconds", cxxopts::value<std::int64_t>())(
        "replication", "replicated share of units", cxxopts::value<double>())(
        "loss-check", "share of results given the held-out loss check", cxxopts::value<double>())(
        "audit", "share of trusted volunteers' results the server replays (0.02)", cxxopts::value<double>())(
        "audit-by", "who replays them: server or volunteers (server)", cxxopts::value<std::string>())(
        "check-by", "who evaluates a result drawn for the loss checks: server or volunteers (server)",
        cxxopts::value<std::string>())(
        "trust-streak", "valid results in a row before a volunteer is trusted (5; 0: every volunteer trusted)",
        cxxopts::value<std::int64_t>())("codec", "delta encoding: f32, bf16, int8, int4, int2",
                                        cxxopts::value<std::string>())(
        "topk", "fraction of each tensor a delta keeps, (0, 1]", cxxopts::value<double>())(
        "patch-codec", "downlink patches: off, bf16, int8, int4, int2 (int2)", cxxopts::value<std::string>())(
        "patch-topk", "fraction of each tensor a patch keeps, (0, 1] (1)", cxxopts::value<double>())(
        "publish-every", "with patches: publish the model every N versions (1)", cxxopts::value<std::int64_t>())(
        "catch-up", "with patches: one patch per unit from each volunteer's model, for up to N volunteers (0)",
        cxxopts::value<std::int64_t>())(
        "no-checks",
        "no replication, loss checks, norm bounds, copy or alignment checks (the codec and merging alone)")(
        "staleness", "async runs' staleness function (const, poly:A, hinge:A,B, conc:M,A[,R])",
        cxxopts::value<std::string>()->default_value(""))(
        "lr-schedule",
        "one inner lr schedule over the run, indexed by samples merged, spanning the budget: cosine (the "
        "default, as task create's) or constant; none: warm-up per unit",
        cxxopts::value<std::string>())("schedule-samples",
                                       "the schedule's span when not the budget (a task's longer run, of which the "
                                       "budget is the start)",
                                       cxxopts::value<std::int64_t>())(
        "warmup-samples", "the schedule's warm-up, samples (two units: 2 x H x batch)", cxxopts::value<std::int64_t>())(
        "final-lr-ratio", "cosine: final lr / lr at the samples budget (0.1)", cxxopts::value<double>())(
        "inner-state",
        "fresh: every unit starts AdamW afresh; kept: each volunteer keeps its moments across units "
        "(the task's default: kept)",
        cxxopts::value<std::string>())("ddp-lr", "the ddp baseline's learning rate (0: sqrt(K) x the task's)",
                                       cxxopts::value<double>()->default_value("0"))(
        "run-lr", "runs' own inner learning rates, e.g. central=4e-3,ddp=1.36e-2,fedasync=8e-3 (others: --lr)",
        cxxopts::value<std::string>()->default_value(""))(
        "per-concurrency",
        "async fedasync: each result divided by C^P, C its stamped concurrency (P 0.75 unless "
        "given as =P; with conc:M,A)",
        cxxopts::value<double>()->implicit_value("0.75"))(
        "momentum", "async diloco / diloco-dn outer momentum (negative: the policy's default)",
        cxxopts::value<double>()->default_value("-1"))(
        "eta", "async runs' server learning rate (0: the policy's default)",
        cxxopts::value<double>()->default_value("0"))("buffer", "fedbuff/diloco buffer (0: the policy's default)",
                                                      cxxopts::value<std::int64_t>()->default_value("0"));
}

// Scoring the samples, counting transfers as another model's, probing the deltas.
void add_judge_options(cxxopts::Options& options) {
    options.add_options()("judge",
                          "pixel dataset of the real images: score each DiT run's samples with a cnn trained on it",
                          cxxopts::value<std::string>()->default_value(""))(
        "judge-cache", "the judge's weights (default: <judge>/judge-cnn.safetensors; trained when absent)",
        cxxopts::value<std::string>()->default_value(""))("judge-samples", "samples per class the judge scores",
                                                          cxxopts::value<std::int64_t>()->default_value("100"))(
        "judge-guidance",
        "classifier-free guidance of the judged samples; a list (e.g. 0,1,3,5) scores each, the "
        "first in the summary (guidance.csv)",
        cxxopts::value<std::string>()->default_value("3"))("judge-steps", "Euler steps of the judged samples",
                                                           cxxopts::value<std::int64_t>()->default_value("20"))(
        "fidelity-captions",
        "captioned canvases (prepare canvases): prompt fidelity of each DiT run on this many validation and "
        "held-out captions, at each --judge-guidance (fidelity.csv); 0: none",
        cxxopts::value<std::int64_t>()->default_value("500"))(
        "fidelity-cache", "the caption judge's cnns (default: <data>/judge-caption; trained when absent)",
        cxxopts::value<std::string>()->default_value(""))(
        "transfer-as", "count model, patch and delta bytes as this preset's (e.g. dit-b), training the task's model",
        cxxopts::value<std::string>()->default_value(""))(
        "look-ahead-s",
        "the volunteers' look-ahead lead, as tessera-client's --look-ahead-s: the next unit is fetched while one "
        "trains (0: off, the client's default)",
        cxxopts::value<double>()->default_value("0"))(
        "look-ahead-share", "as tessera-client's: look ahead for units whose transfers take this share of the training",
        cxxopts::value<double>()->default_value("0.1"))(
        "probe-deltas", "each honest delta's share and agreement per module (probes.csv)")("quiet",
                                                                                           "no progress lines");
    options.add_options()("experts",
                          "a tessera-data cluster folder: also train its experts and router on the budget, split by "
                          "cluster size, and judge them sampled through the router (experts.csv; needs --judge, or "
                          "captioned canvases for prompt fidelity)",
                          cxxopts::value<std::string>()->default_value(""))(
        "routing",
        "with --experts: the routing rules judged, top1, top2, all; -class also routes by the class, -caption by the "
        "caption",
        cxxopts::value<std::string>()->default_value("top1,top2,all"))(
        "router-share", "with --experts: the router's share of the samples budget",
        cxxopts::value<double>()->default_value("0.1"))(
        "expert-model", "with --experts: the experts' preset, e.g. dit-nano (default: the runs' --model)",
        cxxopts::value<std::string>()->default_value(""));
}

}  // namespace

cxxopts::Options fleet_command_options() {
    cxxopts::Options options("tessera-bench fleet",
                             "Asynchronous training by a simulated volunteer fleet on a virtual clock, against the "
                             "central, ddp and sync baselines");
    add_run_options(options);
    add_task_options(options);
    add_judge_options(options);
    return options;
}

namespace {

// The simulation's own settings (the run's size, its clock and its volunteers' look-ahead).
common::Status read_sim_settings(const cxxopts::ParseResult& a, SimSettings& sim) {
    sim.sample_budget = a["samples"].as<std::int64_t>();
    sim.curve_points = a["points"].as<std::int64_t>();
    auto spacing = parse_curve_spacing(a["spacing"].as<std::string>());
    if (!spacing) return common::make_error("--spacing must be even or geometric");
    sim.curve_spacing = *spacing;
    sim.eval_samples = a["eval-samples"].as<std::int64_t>();
    sim.seed = a["seed"].as<std::uint64_t>();
    sim.threads = a["threads"].as<int>();
    sim.tick_s = a["tick"].as<double>();
    sim.quiet = a.count("quiet") > 0;
    sim.look_ahead_s = a["look-ahead-s"].as<double>();
    sim.look_ahead_share = a["look-ahead-share"].as<double>();
    if (!(sim.look_ahead_share >= 0)) return common::make_error("--look-ahead-share must be >= 0");
    if (!(sim.look_ahead_s >= 0 && sim.look_ahead_s <= 86400))
        return common::make_error("--look-ahead-s must be between 0 and 86400 seconds");
    return {};
}

// --experts and what goes with it (after --judge and --fidelity-captions).
common::Status read_expert_options(const cxxopts::ParseResult& a, CommandOptions& o) {
    o.experts = a["experts"].as<std::string>();
    o.routing = split(a["routing"].as<std::string>());
    o.router_share = a["router-share"].as<double>();
    o.expert_model = a["expert-model"].as<std::string>();
    for (const auto& rule : o.routing) {
        auto base = rule;
        for (std::string suffix : {"-class", "-caption"})
            if (base.ends_with(suffix)) base.resize(base.size() - suffix.size());
        if (base != "top1" && base != "top2" && base != "all")
            return common::make_error("--routing: top1, top2 or all, each with -class, -caption or neither, not '" +
                                      rule + "'");
    }
    if (!(o.router_share > 0 && o.router_share < 1)) return common::make_error("--router-share must be in (0, 1)");
    // Which judge a group gets is known once the data is read; without either it has none.
    if (!o.experts.empty() && o.judge_data.empty() && o.fidelity_captions == 0)
        return common::make_error(
            "--experts needs a judge: --judge for a class task, or --fidelity-captions > 0 on captioned canvases");
    return {};
}

}  // namespace

common::Result<CommandOptions> read_fleet_options(const cxxopts::ParseResult& parsed) {
    CommandOptions o;
    o.args = parsed;
    const auto& a = o.args;
    if (!a.count("data")) return common::make_error("--data is required");
    o.data = a["data"].as<std::string>();
    o.fleet = a["fleet"].as<std::string>();
    o.volunteers = a["volunteers"].as<std::int64_t>();
    o.runs = a["runs"].as<std::string>();
    o.out = a["out"].as<std::string>();
    o.model = a["model"].as<std::string>();
    o.staleness = a["staleness"].as<std::string>();
    o.base_speed = a["base-speed"].as<double>();
    o.target_loss = a["target-loss"].as<double>();
    o.overrun = a["overrun"].as<double>();
    o.eta = a["eta"].as<double>();
    o.buffer = a["buffer"].as<std::int64_t>();
    o.momentum = a["momentum"].as<double>();
    if (!(o.momentum < 1)) return common::make_error("--momentum must be below 1 (negative: the policy's default)");
    o.ddp_lr = a["ddp-lr"].as<double>();
    if (!(o.ddp_lr >= 0 && o.ddp_lr <= 10))
        return common::make_error("--ddp-lr must be in [0, 10] (0: sqrt(K) x the task's lr)");
    auto run_lr = parse_run_lrs(a["run-lr"].as<std::string>());
    if (!run_lr) return common::make_error("--run-lr: " + run_lr.message());
    o.run_lr = std::move(*run_lr);
    auto runs = split(o.runs);
    for (const auto& [run, lr] : o.run_lr) {
        if (std::find(runs.begin(), runs.end(), run) != runs.end()) continue;
        return common::make_error("--run-lr names '" + run + "', which --runs does not run");
    }
    if (a.count("schedule-samples") && a["schedule-samples"].as<std::int64_t>() <= 0)
        return common::make_error("--schedule-samples must be positive (the schedule's span)");
    if (a.count("inner-state") && !common::inner_optimizer_from_name(a["inner-state"].as<std::string>()))
        return common::make_error("--inner-state must be fresh or kept");
    o.judge_data = a["judge"].as<std::string>();
    o.judge_cache = a["judge-cache"].as<std::string>();
    o.judge_per_class = a["judge-samples"].as<std::int64_t>();
    auto guidances = parse_guidances(a["judge-guidance"].as<std::string>());
    if (!guidances) return common::make_error("--judge-guidance: " + guidances.message());
    o.sim.judge_guidances = std::move(*guidances);
    o.sim.probe_deltas = a.count("probe-deltas") > 0;
    o.judge_steps = a["judge-steps"].as<std::int64_t>();
    if (o.judge_per_class < 1 || o.judge_steps < 1)
        return common::make_error("--judge-samples and --judge-steps must be >= 1");
    o.fidelity_cache = a["fidelity-cache"].as<std::string>();
    o.fidelity_captions = a["fidelity-captions"].as<std::int64_t>();
    if (o.fidelity_captions < 0) return common::make_error("--fidelity-captions must be >= 0");
    o.transfer_as = a["transfer-as"].as<std::string>();
    if (auto read = read_expert_options(a, o); !read) return read.error();
    if (auto read = read_sim_settings(a, o.sim); !read) return read.error();
    return o;
}

}  // namespace tessera::bench
