// The p-th percentile (0 ≤ p ≤ 1) of a sample by the nearest rank; 0 for an empty sample.
#pragma once

#include <algorithm>
#include <vector>

namespace tessera::bench {

inline double percentile(std::vector<double> values, double p) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    auto index = static_cast<std::size_t>(p * static_cast<double>(values.size() - 1) + 0.5);
    return values[std::min(index, values.size() - 1)];
}

}  // namespace tessera::bench
