// `tessera-bench fleet`'s command line: its options and what they are read into.
#pragma once

#include <cxxopts.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "fleet_sim.h"
#include "result.h"

namespace tessera::bench {

struct CommandOptions {
    std::string data, fleet, runs, out, model, staleness, judge_data, judge_cache, transfer_as;
    std::int64_t judge_per_class = 100;
    std::int64_t judge_steps = 20;
    std::string fidelity_cache;        // the caption judge's cnns (default: <data>/judge-caption)
    std::int64_t fidelity_captions = 500;  // validation and held-out captions scored; 0: no fidelity
    std::int64_t volunteers = 8;
    double base_speed = 100;
    double target_loss = 0;
    double overrun = 3;
    double eta = 0;
    std::int64_t buffer = 0;
    double momentum = -1;  // < 0: the policy's
    double ddp_lr = 0;
    std::map<std::string, double> run_lr;  // --run-lr: a run's own inner learning rate
    // --experts: a `tessera-data cluster` folder whose experts and router run beside --runs
    // (expert_runs.h), sampled through the router by each --routing rule.
    std::string experts;
    std::vector<std::string> routing;
    std::string expert_model;   // the experts' preset ("": the runs' model)
    double router_share = 0.1;  // of the samples budget, for the router
    // > 0: the run's samples, in place of --samples, for its schedule's span (an expert's share).
    std::int64_t schedule_samples = 0;
    SimSettings sim;
    cxxopts::ParseResult args;
};

cxxopts::Options fleet_command_options();
// The options checked: a bad value is an error that names its flag.
common::Result<CommandOptions> read_fleet_options(const cxxopts::ParseResult& parsed);

// "a,b,,c" → {a, b, c}.
std::vector<std::string> split(const std::string& text);

}  // namespace tessera::bench
