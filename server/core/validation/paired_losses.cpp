// Paired loss comparison: means and the standard error of the mean difference.
#include "paired_losses.h"

#include <cmath>
#include <string>

namespace tessera::server {

common::Result<PairedChange> paired_change(const std::vector<double>& before, const std::vector<double>& after) {
    if (before.size() != after.size())
        return common::make_error("paired losses: " + std::to_string(before.size()) + " samples before, " +
                                  std::to_string(after.size()) + " after");
    auto n = before.size();
    if (n == 0) return common::make_error("paired losses: no samples");
    PairedChange out;
    out.samples = n;
    double mean_difference = 0;
    for (std::size_t i = 0; i < n; ++i) {
        out.before += before[i];
        out.after += after[i];
        mean_difference += after[i] - before[i];
    }
    auto count = static_cast<double>(n);
    out.before /= count;
    out.after /= count;
    mean_difference /= count;
    double squares = 0;
    for (std::size_t i = 0; i < n; ++i) {
        double deviation = after[i] - before[i] - mean_difference;
        squares += deviation * deviation;
    }
    // One sample shows no spread: its change is taken as it is.
    out.standard_error = n > 1 ? std::sqrt(squares / (count - 1) / count) : 0.0;
    return out;
}

}  // namespace tessera::server
