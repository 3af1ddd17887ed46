// Where a run's validation curve is evaluated, in samples merged: evenly, or geometrically so
// that a run which reaches a target loss within its first few units is measured there, not
// interpolated from t = 0 to its first even point (docs/fleet_simulator.md, "Output").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tessera::bench {

enum class CurveSpacing { even, geometric };

// The samples at which curve point `index` (1-based) is due: index·budget/points evenly; or
// budget·r^(index−points) with the first point at budget/1000 (at least 1 sample), geometrically.
// Point `points` is the budget itself; past it (a run going on towards a target) the spacing
// goes on the same way. Non-decreasing in `index`.
std::int64_t curve_milestone(std::int64_t budget, std::int64_t points, std::int64_t index, CurveSpacing spacing);

// "even" or "geometric"; nullopt for anything else.
std::optional<CurveSpacing> parse_curve_spacing(const std::string& text);

}  // namespace tessera::bench
