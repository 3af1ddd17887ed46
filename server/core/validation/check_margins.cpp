// The statistical checks' margins (check_margins.h).
#include "check_margins.h"

#include <algorithm>
#include <cmath>

namespace tessera::server {

double median_of(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    auto n = values.size();
    return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double alignment_threshold(const std::vector<double>& recent, double min_alignment) {
    if (recent.size() < kMinMarginFigures) return min_alignment;
    double median = median_of(recent);
    std::vector<double> deviations;
    for (double alignment : recent) deviations.push_back(std::abs(alignment - median));
    return std::min(min_alignment, median - kAlignmentSpreads * kMadToSigma * median_of(std::move(deviations)));
}

double gain_margin(const std::vector<double>& gains, const std::vector<double>& current, double min_gain) {
    double median = median_of(gains);
    std::vector<double> deviations;
    for (double gain : gains) deviations.push_back(std::abs(gain - median));
    double below_spread = median - kGainSpreads * kMadToSigma * median_of(std::move(deviations));
    if (current.size() < kMinGains) return std::min(0.0, below_spread);
    return std::min(min_gain * std::max(0.0, median_of(current)), below_spread);
}

}  // namespace tessera::server
