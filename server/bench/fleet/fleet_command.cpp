// `tessera-bench fleet`: one campaign invocation — a fleet, the baselines and the async
// policies on the same data and samples budget — printed as a summary table and written as
// curves.csv and summary.csv (docs/fleet_simulator.md).
#include "fleet_command.h"

#include <cxxopts.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "central_run.h"
#include "command_line.h"
#include "fleet_command_line.h"
#include "fleet_report.h"
#include "fleet_sim.h"
#include "fleet_spec.h"
#include "fleet_task_config.h"
#include "caption_judge.h"
#include "dataset_manifest.h"
#include "expert_clusters.h"
#include "expert_runs.h"
#include "fidelity_report.h"
#include "sample_judge.h"
#include "task_setup.h"
#include "model_cache.h"
#include "torch_model.h"

namespace tessera::bench {
namespace {

common::Status write_curves_and_summary(const std::filesystem::path& out, const std::vector<RunResult>& results,
                                        const std::vector<RunSummary>& rows, double target) {
    if (auto status = write_curves_csv(out / "curves.csv", results); !status) return status;
    return write_summary_csv(out / "summary.csv", rows, target);
}

common::Result<std::vector<SimVolunteer>> make_fleet(const CommandOptions& o) {
    auto spec = std::filesystem::exists(o.fleet) ? load_fleet_file(o.fleet)
                                                 : preset_fleet(o.fleet, o.volunteers, o.base_speed, o.sim.seed);
    if (!spec) return spec.error();
    return expand_fleet(*spec);
}

std::string format_share(double share) {
    char text[32];
    std::snprintf(text, sizeof text, "%.3f", share);
    return text;
}

bool honest_and_steady(const std::vector<SimVolunteer>& fleet) {
    for (const auto& v : fleet)
        if (v.attack != Attack::None || v.churn.mean_online_s > 0) return false;
    return true;
}

// --transfer-as: that preset's parameters over the task model's; 1 without it.
common::Result<double> payload_scale(const CommandOptions& o) {
    if (o.transfer_as.empty()) return 1.0;
    auto config = base_config(o, server::PolicyKind::FedAsync);
    if (!config) return config.error();
    auto own = server::initial_weights(*config);
    if (!own) return own.error();
    config->model = o.transfer_as;
    auto other = server::initial_weights(*config);
    if (!other) return common::with_context("--transfer-as", other.error());
    return static_cast<double>(server::value_count(*other)) / static_cast<double>(server::value_count(*own));
}

// The judge of generated samples, when the command asked for one.
common::Result<std::unique_ptr<SampleJudge>> make_judge(const CommandOptions& o) {
    if (o.judge_data.empty()) return std::unique_ptr<SampleJudge>();
    JudgeOptions options;
    options.pixels = o.judge_data;
    options.latents = o.data;
    options.cache = o.judge_cache.empty() ? std::filesystem::path(o.judge_data) / "judge-cnn.safetensors"
                                          : std::filesystem::path(o.judge_cache);
    options.per_class = o.judge_per_class;
    options.sampling_steps = o.judge_steps;
    options.quiet = o.sim.quiet;
    return SampleJudge::make(options);
}

// The caption judge, when the dataset is captioned canvases and fidelity was not turned off.
common::Result<std::unique_ptr<CaptionJudge>> make_caption_judge(const CommandOptions& o) {
    if (o.fidelity_captions == 0) return std::unique_ptr<CaptionJudge>();
    auto manifest = common::load_dataset_manifest(std::filesystem::path(o.data) / "dataset.json");
    if (!manifest) return manifest.error();
    if (manifest->text_dim <= 0 || manifest->heldout.file.empty()) return std::unique_ptr<CaptionJudge>();
    CaptionJudgeOptions options;
    options.data = o.data;
    options.cache = o.fidelity_cache.empty() ? std::filesystem::path(o.data) / "judge-caption"
                                             : std::filesystem::path(o.fidelity_cache);
    options.captions = o.fidelity_captions;
    options.sampling_steps = o.judge_steps;
    options.quiet = o.sim.quiet;
    auto judge = CaptionJudge::make(options);
    if (judge && !o.sim.quiet) {
        const auto& c = (*judge)->ceilings();
        std::cerr << "caption judge ceilings (real canvases, decoded): object " << format_share(c.object)
                  << ", relation " << format_share(c.relation) << ", attribute " << format_share(c.attribute)
                  << ", held-out " << format_share(c.heldout) << "\n";
    }
    return judge;
}

// One run of the campaign. A failure says its exit code: 2 for a run the options cannot
// make, 1 for one that failed. A synchronous run says so in `settings`.
common::Result<RunResult> run_one(const CommandOptions& o, const std::string& run,
                                  const std::vector<SimVolunteer>& fleet, SimSettings& settings, int& exit_code) {
    exit_code = 2;
    auto own_lr = o.run_lr.find(run);
    bool has_own_lr = own_lr != o.run_lr.end();
    common::Result<RunResult> result = common::make_error("not run");
    if (run == "central" || run == "ddp") {
        auto config = base_config(o, server::PolicyKind::FedAsync);
        if (!config) return config.error();
        if (run == "central" && has_own_lr) config->lr = own_lr->second;
        double ddp_lr = run == "ddp" && has_own_lr ? own_lr->second : o.ddp_lr;
        exit_code = 1;
        result = run == "central" ? run_central(*config, median_speed(fleet), settings)
                                  : run_ddp(*config, fleet, ddp_lr, settings);
        if (!result) return common::make_error(run + ": " + result.message());
        return result;
    }
    auto config = config_for(o, run, static_cast<std::int64_t>(fleet.size()), settings.synchronous);
    if (!config) return config.error();
    if (has_own_lr) config->lr = own_lr->second;
    if (settings.synchronous && !honest_and_steady(fleet))
        return common::make_error(run + " needs a fleet without churn or hostile volunteers");
    exit_code = 1;
    auto work = std::filesystem::path(o.out) / ("state-" + run);
    std::filesystem::remove_all(work);
    result = simulate_fleet(*config, fleet, settings, work);
    std::filesystem::remove_all(work);
    if (!result) return common::make_error(run + ": " + result.message());
    return result;
}

// The judge's ceilings (judge.csv) and, over several guidance scales, each one's figures.
common::Status write_judge_outputs(const CommandOptions& o, const SampleJudge& judge,
                                   const std::vector<RunResult>& results) {
    auto out = std::filesystem::path(o.out);
    const auto& c = judge.ceilings();
    std::cout << "cas: share of " << o.judge_per_class << " samples per class (guidance "
              << o.sim.judge_guidances.front() << ", " << o.judge_steps
              << " steps) that a cnn trained on the real images classifies as asked; "
              << "ceilings: real test images " << format_share(c.real_images) << ", decoded test latents "
              << format_share(c.reconstructed) << "\n";
    std::ofstream ceilings(out / "judge.csv");
    ceilings << "real_images,decoded_test_latents,samples_per_class\n"
             << c.real_images << "," << c.reconstructed << "," << o.judge_per_class << "\n";
    if (o.sim.judge_guidances.size() <= 1) return {};
    print_guidance(std::cout, results, o.sim.judge_guidances);
    return write_guidance_csv(out / "guidance.csv", results, o.sim.judge_guidances);
}

// The campaign's files: curves and summary, the checks' figures, and the probes when asked.
common::Status write_outputs(const CommandOptions& o, const std::vector<RunResult>& results,
                             const std::vector<RunSummary>& rows, double target) {
    auto out = std::filesystem::path(o.out);
    if (auto status = write_curves_and_summary(out, results, rows, target); !status) return status;
    if (auto status = write_checks_csv(out / "checks.csv", results); !status) return status;
    if (!o.sim.probe_deltas) return {};
    print_probes(std::cout, results);
    return write_probes_csv(out / "probes.csv", results);
}

// What the judges measured: judge.csv (and guidance.csv), fidelity.csv; nothing without them.
common::Status write_judged(const CommandOptions& o, const SampleJudge* judge, const CaptionJudge* caption_judge,
                            const std::vector<RunResult>& results) {
    if (judge != nullptr)
        if (auto status = write_judge_outputs(o, *judge, results); !status) return status;
    if (caption_judge == nullptr) return {};
    print_fidelity(std::cout, results, o.sim.judge_guidances, caption_judge->ceilings(), o.fidelity_captions);
    return write_fidelity_csv(std::filesystem::path(o.out) / "fidelity.csv", results, o.sim.judge_guidances,
                              caption_judge->ceilings());
}

// One member of an expert group (expert_runs.h): a fedasync run on its own dataset and budget,
// its schedule spanning that budget, judged by nobody until the group is sampled.
common::Result<RunResult> run_member(const CommandOptions& o, const std::string& fleet_label, const MemberRun& m) {
    auto member = o;
    member.data = m.data.string();
    member.model = m.model;
    if (!o.args.count("schedule-samples")) member.schedule_samples = m.budget;
    bool synchronous = false;
    auto config = config_for(member, "fedasync", static_cast<std::int64_t>(m.fleet.size()), synchronous);
    if (!config) return config.error();
    if (m.model == "router") config->lr = server::default_lr(*config);  // not the experts' --lr
    auto settings = o.sim;
    settings.run_name = m.name;
    settings.fleet_name = fleet_label;
    settings.sample_budget = m.budget;
    settings.judge = nullptr;
    settings.caption_judge = nullptr;
    std::cerr << m.name << " (" << m.budget << " samples of " << m.data.filename().string() << ", " << m.fleet.size()
              << " volunteers):\n";
    auto work = std::filesystem::path(o.out) / ("state-" + m.name);
    std::filesystem::remove_all(work);
    auto result = simulate_fleet(*config, m.fleet, settings, work);
    std::filesystem::remove_all(work);
    return result;
}

// --experts: the group's runs (into `results`), then experts.csv beside the monolithic runs.
common::Status run_experts(const CommandOptions& o, const std::vector<SimVolunteer>& fleet,
                           const std::string& fleet_label, ExpertJudges judges, std::vector<RunResult>& results) {
    auto model = base_config(o, server::PolicyKind::FedAsync);
    if (!model) return model.error();
    auto monolithic = results;
    auto expert_model = o.expert_model.empty() ? model->model : o.expert_model;
    auto members = run_expert_members(o.experts, "fedasync", expert_model, o.sim.sample_budget, o.router_share, fleet,
                                      [&](const MemberRun& member) { return run_member(o, fleet_label, member); });
    if (!members) return members.error();
    for (const auto& member : *members) results.push_back(member);
    auto clusters = common::load_cluster_manifest(std::filesystem::path(o.experts) / "clusters.json");
    if (!clusters) return clusters.error();
    auto rows = judge_experts(judges, model->model, expert_model, monolithic, *members, o.routing, *clusters,
                              o.sim.judge_guidances.front());
    if (!rows) return rows.error();
    print_experts(std::cout, *rows);
    return write_experts_csv(std::filesystem::path(o.out) / "experts.csv", *rows);
}

int run_campaign(CommandOptions& o) {
    auto fail = [](int exit_code, const std::string& message) {
        std::cerr << "tessera-bench fleet: " << message << "\n";
        return exit_code;
    };
    auto fleet = make_fleet(o);
    if (!fleet) return fail(2, fleet.message());
    auto scale = payload_scale(o);
    if (!scale) return fail(2, scale.message());
    o.sim.payload_scale = *scale;
    if (!o.transfer_as.empty())
        std::cerr << "transfers counted as " << o.transfer_as << "'s: model, patch and delta bytes x " << *scale
                  << "\n";
    std::filesystem::create_directories(o.out);
    auto fleet_label = std::filesystem::exists(o.fleet) ? std::filesystem::path(o.fleet).stem().string() : o.fleet;
    std::cerr << "fleet " << fleet_label << ": " << fleet->size() << " volunteers, median " << median_speed(*fleet)
              << " samples/s; budget " << o.sim.sample_budget << " samples\n";
    auto judge = make_judge(o);
    if (!judge) return fail(1, judge.message());
    o.sim.judge = judge->get();
    auto caption_judge = make_caption_judge(o);
    if (!caption_judge) return fail(1, "prompt fidelity: " + caption_judge.message());
    o.sim.caption_judge = caption_judge->get();
    if (!o.experts.empty() && !*judge && !*caption_judge)
        return fail(2, "--experts needs a judge: --judge for a class task, or captioned canvases (prompt fidelity)");

    std::vector<RunResult> results;
    double target = o.target_loss;  // 0 until given, or until a sync run sets it
    for (const auto& run : split(o.runs)) {
        auto settings = o.sim;
        settings.run_name = run;
        settings.fleet_name = fleet_label;
        settings.target_loss = target;
        settings.overrun = o.overrun;
        std::cerr << run << ":\n";
        int exit_code = 0;
        auto result = run_one(o, run, *fleet, settings, exit_code);
        if (!result) return fail(exit_code, result.message());
        // Later runs go on past the budget until they reach sync's loss (time to target).
        if (target <= 0 && settings.synchronous) target = result->curve.at(result->budget_point).loss;
        results.push_back(std::move(*result));
        // Every finished run is on disk at once: a campaign stopped midway keeps what it measured.
        double so_far = target;
        if (auto status = write_curves_and_summary(o.out, results, summarize(results, o.target_loss, so_far), so_far);
            !status)
            return fail(1, status.message());
    }
    if (!o.experts.empty())
        if (auto status = run_experts(o, *fleet, fleet_label, {judge->get(), caption_judge->get()}, results); !status)
            return fail(1, "experts: " + status.message());
    auto rows = summarize(results, o.target_loss, target);
    print_summary(std::cout, rows, target);
    if (auto status = write_judged(o, judge->get(), caption_judge->get(), results); !status)
        return fail(1, status.message());
    if (auto status = write_outputs(o, results, rows, target); !status) return fail(1, status.message());
    return 0;
}

}  // namespace

int run_fleet_command(int argc, char** argv) {
    auto options = fleet_command_options();
    try {
        auto parsed = common::parse_command_line(options, argc, argv);
        if (!parsed) return parsed.exit_code;
        auto o = read_fleet_options(*parsed);
        if (!o) {
            std::cerr << "tessera-bench fleet: " << o.message() << "\n";
            return 2;
        }
        return run_campaign(*o);
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench fleet: " << error.what() << "\n";
        return 2;
    }
}

}  // namespace tessera::bench
