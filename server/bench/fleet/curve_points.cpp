#include "curve_points.h"

#include <algorithm>
#include <cmath>

namespace tessera::bench {

namespace {

// The geometric spacing's first point, as a share of the budget.
constexpr double first_point_share = 1e-3;

}  // namespace

std::int64_t curve_milestone(std::int64_t budget, std::int64_t points, std::int64_t index, CurveSpacing spacing) {
    points = std::max<std::int64_t>(1, points);
    if (spacing == CurveSpacing::even || points == 1) return budget * index / points;
    double first = std::max(1.0, first_point_share * static_cast<double>(budget));
    double ratio = std::pow(static_cast<double>(budget) / first, 1.0 / static_cast<double>(points - 1));
    if (index == points) return budget;
    auto at = static_cast<double>(budget) * std::pow(ratio, static_cast<double>(index - points));
    return std::max<std::int64_t>(1, std::llround(at));
}

std::optional<CurveSpacing> parse_curve_spacing(const std::string& text) {
    if (text == "even") return CurveSpacing::even;
    if (text == "geometric") return CurveSpacing::geometric;
    return std::nullopt;
}

}  // namespace tessera::bench
