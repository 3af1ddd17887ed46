// The margins the statistical checks draw from recent results (docs/operations.md,
// "Validation"): the median, the alignment floor and the gain margin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::server {

// Recent accepted results' figures stand in for the calibration's once there are this many.
constexpr std::size_t kMinMarginFigures = 5;

// The median of `values` (not empty).
double median_of(std::vector<double> values);

// The gain margin's allowance for honest spread: this many robust standard deviations
// (kMadToSigma × the median absolute deviation) below the median.
constexpr double kGainSpreads = 6;
constexpr double kMadToSigma = 1.4826;
// "Current" gains are those of units based on at most this many versions before the result's,
// and a median of them needs kMinGains.
constexpr std::int64_t kGainVersions = 10;
constexpr std::size_t kMinGains = 5;
// Current gains are those of units of at least this share of the result's full-rate steps: a
// unit's loss falls fastest in its first steps, so a short unit gains more per step than a
// long one on the same model (a young fleet's warm-up units gained 0.16-0.19 per full-rate
// step on version 0, full units 0.025-0.032, and a margin set by the first refused the second).
constexpr double kComparableSteps = 0.5;

// The alignment a result must reach: the lower of `min_alignment` and the median of recent
// passing results' alignments less kAlignmentSpreads robust spreads (a model near its plateau,
// where honest deltas share little of their direction, scatter widely around a small
// median); `min_alignment` while fewer than kMinMarginFigures are known. A sign-flipped copy of a
// typical honest result (cosine about −median) is refused while the median stands 2¼ spreads
// above 0; closer to 0 honest results reach as low (docs/benchmarks.md, "The alignment floor":
// a floor at −½ × the median refused 4–11 % of real clients' honest results there).
constexpr double kAlignmentSpreads = 4.5;
double alignment_threshold(const std::vector<double>& recent, double min_alignment);

// The gain per step a result must exceed: the lower of min_gain × the median of `current`
// gains (a young model: large, alike gains) and the median of the recent `gains` (not empty)
// less kGainSpreads robust spreads (a plateau, where they scatter around 0). While fewer than
// kMinGains are current, the lower of 0 and the second: the young model's gains fall several-
// fold within a few dozen versions, and older gains would set a margin far above today's.
double gain_margin(const std::vector<double>& gains, const std::vector<double>& current, double min_gain);

}  // namespace tessera::server
