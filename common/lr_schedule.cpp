// The run-wide inner learning-rate schedule (lr_schedule.h).
#include "lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

namespace tessera::common {
namespace {

// Counts travel in JSON numbers: 2^53 keeps them exact.
constexpr std::int64_t kMaxSamples = std::int64_t{1} << 53;

}  // namespace

std::string_view lr_schedule_kind_name(LrSchedule::Kind kind) {
    return kind == LrSchedule::Kind::Cosine ? "cosine" : "constant";
}

std::optional<LrSchedule::Kind> lr_schedule_kind_from_name(std::string_view name) {
    if (name == "constant") return LrSchedule::Kind::Constant;
    if (name == "cosine") return LrSchedule::Kind::Cosine;
    return std::nullopt;
}

Status validate_lr_schedule(const LrSchedule& s) {
    if (s.warmup_samples < 0 || s.warmup_samples > kMaxSamples)
        return make_error("warmup_samples must be in 0..2^53, got " + std::to_string(s.warmup_samples));
    if (s.kind == LrSchedule::Kind::Constant) return {};
    if (s.total_samples <= s.warmup_samples || s.total_samples > kMaxSamples)
        return make_error("a cosine schedule's total_samples must exceed warmup_samples (" +
                          std::to_string(s.warmup_samples) + ") and be at most 2^53, got " +
                          std::to_string(s.total_samples));
    if (!(s.final_lr_ratio >= 0 && s.final_lr_ratio <= 1))
        return make_error("final_lr_ratio must be in [0, 1], got " + std::to_string(s.final_lr_ratio));
    return {};
}

double lr_factor(const LrSchedule& s, double position, std::int64_t batch_size) {
    const double p = std::max(position, 0.0);
    double warm = 1.0;
    if (s.warmup_samples > 0)
        warm = std::min(1.0, (p + static_cast<double>(batch_size)) / static_cast<double>(s.warmup_samples));
    if (s.kind == LrSchedule::Kind::Constant) return warm;
    const double w = static_cast<double>(s.warmup_samples), t = static_cast<double>(s.total_samples);
    const double progress = std::clamp((p - w) / (t - w), 0.0, 1.0);
    const double r = s.final_lr_ratio;
    return warm * (r + (1 - r) * 0.5 * (1 + std::cos(std::numbers::pi * progress)));
}

double unit_position(std::int64_t from, std::int64_t to, std::int64_t step, std::int64_t steps) {
    if (steps <= 0) return static_cast<double>(from);
    return static_cast<double>(from) +
           static_cast<double>(to - from) * static_cast<double>(step) / static_cast<double>(steps);
}

double step_lr_share(const UnitRate& unit, std::int64_t step) {
    double warm = unit.warmup_steps > 0
                      ? std::min(1.0, static_cast<double>(step + 1) / static_cast<double>(unit.warmup_steps))
                      : 1.0;
    if (!unit.schedule) return warm;
    return lr_factor(*unit.schedule, unit_position(unit.from, unit.to, step, unit.steps), unit.batch_size) * warm;
}

double full_rate_steps(const UnitRate& unit) {
    double total = 0;
    for (std::int64_t step = 0; step < unit.steps; ++step) total += step_lr_share(unit, step);
    return total;
}

}  // namespace tessera::common
