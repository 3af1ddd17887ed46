// The central and ddp baselines: the trainer itself over all shards, evaluated at evenly spaced steps.
#include "central_run.h"

#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <limits>

#include "dataset_manifest.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch_model.h"

namespace tessera::bench {

namespace {

// One run of the trainer over `steps` steps on the CPU, following the task's run-wide schedule.
common::TrainConfig central_train_config(const server::TaskConfig& config, const SimSettings& settings,
                                         std::int64_t steps) {
    auto train =
        common::train_config_for(server::inner_loop_of(config, steps, static_cast<std::int64_t>(settings.seed)));
    train.device = "cpu";
    train.num_classes = config.num_classes;
    if (config.lr_schedule) {
        // The task's run-wide schedule at step s's position s·B, as the fleet's units follow it.
        train.schedule = config.lr_schedule;
        train.schedule_from = 0;
        train.schedule_to = train.steps * config.batch_size;
    }
    return train;
}

// The figures at the budget: the whole validation set, and the judges' scores when they run.
common::Status final_figures(server::ModelProbe& probe, const common::NamedTensors& weights,
                             const server::TaskConfig& config, const SimSettings& settings, RunResult& result) {
    auto full = probe.evaluate(weights, std::numeric_limits<std::int64_t>::max());
    if (!full) return full.error();
    result.final_loss = full->loss;
    result.final_accuracy = full->accuracy.value_or(-1);
    result.budget_weights = std::make_shared<const common::NamedTensors>(weights);
    return judge_samples(settings, config.model, weights, result);
}

// A curve point at `step` of a run of batch `batch` at `samples_per_s`.
CurvePoint curve_point(std::int64_t step, const server::ProbeResult& eval, std::int64_t batch, double samples_per_s) {
    CurvePoint point;
    point.samples = step * batch;
    point.virtual_s = static_cast<double>(point.samples) / samples_per_s;
    point.version = step;
    point.loss = eval.loss;
    point.accuracy = eval.accuracy.value_or(-1);
    point.busy = step > 0 ? 1 : 0;
    return point;
}

common::Result<std::unique_ptr<server::ModelProbe>> validation_probe(const server::TaskConfig& config,
                                                                     const std::filesystem::path& validation) {
    auto factory = server::make_torch_probe_factory(config, validation);
    if (!factory) return factory.error();
    return (*factory)();
}

// The first step whose samples reach curve milestone `n`.
std::int64_t steps_to_milestone(const SimSettings& settings, std::int64_t n, std::int64_t batch) {
    auto samples = curve_milestone(settings.sample_budget, settings.curve_points, n, settings.curve_spacing);
    return std::max<std::int64_t>(1, (samples + batch - 1) / batch);
}

// The result of a run on one machine, named by the settings (central's, or ddp's).
RunResult one_machine_run(const SimSettings& settings) {
    RunResult result;
    result.name = settings.run_name.empty() ? "central" : settings.run_name;
    result.fleet = settings.fleet_name;
    result.volunteers = 1;
    return result;
}

}  // namespace

common::Result<RunResult> run_central(const server::TaskConfig& config, double samples_per_s,
                                      const SimSettings& settings) {
    if (!(samples_per_s > 0)) return common::make_error("the central baseline needs a positive speed");
    std::filesystem::path dir = config.data_dir;
    auto manifest = common::load_dataset_manifest(dir / "dataset.json");
    if (!manifest) return manifest.error();
    auto data = common::load_training_set(dir, *manifest);
    if (!data) return data.error();
    auto probe = validation_probe(config, dir / manifest->validation.file);
    if (!probe) return probe.error();
    auto theta0 = server::initial_weights(config);
    if (!theta0) return theta0.error();
    if (settings.threads > 0) torch::set_num_threads(settings.threads);

    auto result = one_machine_run(settings);
    auto eval_samples = curve_samples(settings);
    common::Status failure;
    auto add_point = [&](std::int64_t step, const common::NamedTensors& weights) {
        auto eval = (*probe)->evaluate(weights, eval_samples);
        if (!eval) {
            failure = eval.error();
            return;
        }
        result.curve.push_back(curve_point(step, *eval, config.batch_size, samples_per_s));
        if (!settings.quiet)
            std::cerr << "  " << result.name << ": samples " << result.curve.back().samples << ", loss "
                      << result.curve.back().loss << "\n";
    };
    add_point(0, *theta0);

    // Central trains a quarter past the budget, so a fleet run that overshoots it (units are
    // indivisible) is compared with central at its own sample count; the final figures on the
    // whole validation set are taken at the budget itself.
    std::int64_t budget_steps = (settings.sample_budget + config.batch_size - 1) / config.batch_size;
    auto train = central_train_config(config, settings, budget_steps + budget_steps / 4);
    // A point at the first step whose samples reach the next milestone, however many it passed.
    std::int64_t milestones_passed = 0;
    auto milestone_steps = [&] { return steps_to_milestone(settings, milestones_passed + 1, config.batch_size); };
    train.snapshot_every = 1;
    train.snapshot = [&](std::int64_t step, const common::TorchTensorMap& weights) {
        if (!failure || (step < milestone_steps() && step != budget_steps)) return;
        while (step >= milestone_steps()) ++milestones_passed;
        auto named = common::to_named_f32(weights);
        add_point(step, named);
        if (step != budget_steps || !failure) return;
        result.budget_point = result.curve.size() - 1;
        failure = final_figures(**probe, named, config, settings, result);
    };
    auto outcome = common::train(config.model, common::from_named_f32(*theta0), *data, train);
    if (!outcome) return outcome.error();
    if (!failure) return failure.error();
    // One volunteer, busy all the time, whose one "unit" was the whole run.
    result.budget_reached = true;
    result.units_issued = 1;
    result.outcomes.count["merged"] = 1;
    result.online_s = result.outcomes.seconds["merged"] =
        static_cast<double>(budget_steps * config.batch_size) / samples_per_s;
    return result;
}

common::Result<RunResult> run_ddp(const server::TaskConfig& config, const std::vector<SimVolunteer>& fleet, double lr,
                                  const SimSettings& settings) {
    if (fleet.empty()) return common::make_error("the ddp baseline needs a fleet");
    const auto k = static_cast<std::int64_t>(fleet.size());
    double combined_speed = 0;
    for (const auto& volunteer : fleet) combined_speed += volunteer.samples_per_s;
    auto ddp = config;
    ddp.batch_size = config.batch_size * k;
    ddp.lr = lr > 0 ? lr : std::sqrt(static_cast<double>(k)) * config.lr;
    auto named = settings;
    if (named.run_name.empty()) named.run_name = "ddp";
    auto result = run_central(ddp, combined_speed, named);
    if (result) result->volunteers = k;
    return result;
}

}  // namespace tessera::bench
