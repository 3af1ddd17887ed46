// The settings of the short simulations the bench tests run: one thread, quiet, seed 3, a
// few curve points on 64 validation samples.
#pragma once

#include <string>

#include "fleet_sim.h"

namespace tessera::bench {

inline SimSettings small_settings(const std::string& name, std::int64_t budget = 160) {
    SimSettings settings;
    settings.run_name = name;
    settings.fleet_name = "test";
    settings.sample_budget = budget;
    settings.curve_points = 4;
    settings.eval_samples = 64;
    settings.tick_s = 5;
    settings.threads = 1;
    settings.quiet = true;
    settings.seed = 3;
    return settings;
}

}  // namespace tessera::bench
