// Seeded k-means over per-sample features (docs/dataset_format.md, "cluster"): k-means++
// seeding, then Lloyd's iterations until no sample changes cluster. Plain double arithmetic
// in a fixed order on one thread, so the same features and seed give the same clusters on
// every machine.
#pragma once

#include <cstdint>
#include <vector>

#include "result.h"

namespace tessera::data {

struct KMeansOptions {
    std::int64_t clusters = 4;
    std::uint64_t seed = 0;
    std::int64_t max_iterations = 100;
};

struct KMeansResult {
    std::int64_t dim = 0;
    std::vector<double> centres;           // clusters × dim, row-major
    std::vector<std::int64_t> assignment;  // each sample's cluster
    std::vector<std::int64_t> sizes;       // samples per cluster, every one ≥ 1
    std::int64_t iterations = 0;           // Lloyd's iterations run
    bool converged = false;                // false: stopped at max_iterations
    std::int64_t refilled = 0;             // times an emptied cluster took a far sample
    double inertia = 0;                    // Σ squared distance to the own centre

    std::int64_t clusters() const { return static_cast<std::int64_t>(sizes.size()); }
};

// `features` holds `rows` samples of `dim` values each, row-major. Refuses fewer distinct
// samples than clusters, non-finite values and empty input.
common::Result<KMeansResult> kmeans(const std::vector<float>& features, std::int64_t rows, std::int64_t dim,
                                    const KMeansOptions& options);

// Lloyd's iterations from the given centres (clusters × dim), as kmeans runs them after seeding.
common::Result<KMeansResult> lloyd(const std::vector<float>& features, std::int64_t rows, std::int64_t dim,
                                   std::vector<double> centres, std::int64_t max_iterations);

// The nearest of `centres` (clusters × dim) to `point` (dim values); ties go to the lower index.
std::int64_t nearest_centre(const float* point, const std::vector<double>& centres, std::int64_t dim);

}  // namespace tessera::data
