#include "unit_sizing.h"

#include <algorithm>
#include <cmath>

namespace tessera::server {

namespace {

bool rounds_bound(const TaskConfig& config) {
    return config.min_rounds > 0 && config.lr_schedule && config.lr_schedule->total_samples > 0;
}

}  // namespace

bool sizing_reads_fleet(const TaskConfig& config) {
    return rounds_bound(config) || (config.units_end_together && config.target_seconds > 0);
}

std::int64_t most_local_steps(const TaskConfig& config, const FleetNow& fleet) {
    if (!rounds_bound(config)) return config.local_steps;
    const double samples_per_round = static_cast<double>(config.min_rounds) *
                                     static_cast<double>(std::max<std::int64_t>(1, fleet.concurrency)) *
                                     static_cast<double>(config.batch_size);
    const double steps = std::floor(static_cast<double>(config.lr_schedule->total_samples) / samples_per_round);
    return std::clamp<std::int64_t>(static_cast<std::int64_t>(std::min(steps, 1e15)), 1, config.local_steps);
}

// Never above the most: the merge weighs every result alike, so a fast volunteer's long unit
// would outweigh the others (the fleet simulator measured it, docs/benchmarks.md).
std::int64_t unit_local_steps(const TaskConfig& config, const FleetNow& fleet, double samples_per_s) {
    const auto most = most_local_steps(config, fleet);
    if (config.target_seconds <= 0) return most;
    if (!(samples_per_s > 0)) return std::max<std::int64_t>(1, most / 4);
    const double batch = static_cast<double>(config.batch_size);
    double steps = config.target_seconds * samples_per_s / batch;
    std::int64_t least = std::max<std::int64_t>(1, most / 8);
    if (config.units_end_together) {
        least = 1;
        // The fastest volunteer's unit has `most` steps and ends first; a slower one's ends with it.
        const double fastest = std::max(fleet.fastest_samples_per_s, samples_per_s);
        steps = std::min(steps, static_cast<double>(most) * samples_per_s / fastest);
    }
    return std::clamp(static_cast<std::int64_t>(std::llround(std::min(steps, 1e15))), least, most);
}

}  // namespace tessera::server
