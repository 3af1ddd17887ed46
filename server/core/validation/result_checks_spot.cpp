// ResultChecks: a loss-check unit's report checked on a sample of its rows (result_checks.h).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>

#include "model_cache.h"
#include "plain_number.h"
#include "result_checks.h"
#include "tensor_math.h"

namespace tessera::server {
namespace {

// A recomputed loss against a reported one: the checker evaluates on a CPU as the server does,
// so they differ by summation order only (batches of other sizes).
constexpr double kSpotTolerance = 1e-4;

// Up to `count` distinct rows of [0, n), increasing.
std::vector<std::int64_t> spot_rows(std::int64_t n, std::size_t count, std::mt19937_64& rng) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(n));
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng);
    rows.resize(std::min(rows.size(), count));
    std::sort(rows.begin(), rows.end());
    return rows;
}

// "" when `reported` agrees at `rows` with `measured` (their losses there), else the first row
// that does not.
std::string differs(const std::string& name, const std::vector<double>& reported, const std::vector<std::int64_t>& rows,
                    const std::vector<double>& measured) {
    for (std::size_t i = 0; i < rows.size() && i < measured.size(); ++i) {
        double r = reported[static_cast<std::size_t>(rows[i])], m = measured[i];
        if (!(std::abs(r - m) <= kSpotTolerance * std::max(std::abs(r), std::abs(m)) + 1e-9))
            return name + "[" + std::to_string(rows[i]) + "] is " + common::plain_number(r) + "; the server measured " +
                   common::plain_number(m) + " (tolerance " + common::plain_number(kSpotTolerance) + " relative)";
    }
    return {};
}

}  // namespace

common::Result<std::string> ResultChecks::spot_check(const AssignmentRecord& a, const TaskView& task,
                                                     const common::WorkUnit& unit, const common::LossReport& report,
                                                     std::uint64_t seed) {
    const auto started = std::chrono::steady_clock::now();
    auto pool = probes_.of(a.task_id);
    if (!pool) return pool.error();
    auto held_out_rows = (*pool)->held_out_rows();
    if (!held_out_rows) return held_out_rows.error();
    auto samples = assigned_samples(unit, task.config.check_samples);
    auto own_rows = (*pool)->assigned_rows(samples);
    if (!own_rows) return own_rows.error();
    const auto held_out = static_cast<std::size_t>(std::min(task.config.check_samples, *held_out_rows));
    const auto own = static_cast<std::size_t>(*own_rows);
    if (report.held_out_before.size() != held_out || report.own_before.size() != own)
        return "the report holds " + std::to_string(report.held_out_before.size()) + " held-out and " +
               std::to_string(report.own_before.size()) + " own losses; the check asked for " +
               std::to_string(held_out) + " and " + std::to_string(own);
    auto base = base_of(a, task, unit);
    if (!base) return base.error();
    auto delta = results_.read_decoded(a.id, value_count(**base) + 1);
    if (!delta) return common::with_context("the checked result", delta.error());
    if (auto layout = check_same_layout(**base, delta->tensors); !layout) return layout.error();
    auto after = applied(**base, delta->tensors);

    std::mt19937_64 rng(seed);
    auto held_out_at = spot_rows(static_cast<std::int64_t>(held_out), kSpotRows, rng);
    samples.rows = spot_rows(static_cast<std::int64_t>(own), kSpotRows, rng);
    auto before = (*pool)->check_losses(**base, task.config.check_samples, held_out_at);
    if (!before) return before.error();
    auto later = (*pool)->check_losses(after, task.config.check_samples, held_out_at);
    if (!later) return later.error();
    auto own_losses = (*pool)->losses_on_assigned({&**base, &after}, samples);
    if (!own_losses) return own_losses.error();
    costs_.spot.fetch_add(std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    for (auto found : {differs("held_out_before", report.held_out_before, held_out_at, *before),
                       differs("held_out_after", report.held_out_after, held_out_at, *later),
                       differs("own_before", report.own_before, samples.rows, (*own_losses)[0]),
                       differs("own_after", report.own_after, samples.rows, (*own_losses)[1])})
        if (!found.empty()) return found;
    return std::string();
}

}  // namespace tessera::server
