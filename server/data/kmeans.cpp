// k-means++ seeding (Arthur & Vassilvitskii, 2007) and Lloyd's iterations; an emptied cluster
// takes the sample farthest from its own centre, so every cluster keeps at least one sample.
#include "kmeans.h"

#include <cmath>
#include <random>
#include <string>

namespace tessera::data {
namespace {

double squared_distance(const float* point, const double* centre, std::int64_t dim) {
    double sum = 0;
    for (std::int64_t j = 0; j < dim; ++j) {
        double d = point[j] - centre[j];
        sum += d * d;
    }
    return sum;
}

// A draw in [0, 1) from the top 53 bits, the same on every standard library.
double unit_draw(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

std::vector<double> centre_at(const float* point, std::int64_t dim) { return {point, point + dim}; }

// k-means++: the first centre uniformly, each next one with probability ∝ the squared
// distance to the nearest centre chosen so far.
common::Result<std::vector<double>> seed_centres(const std::vector<float>& features, std::int64_t rows,
                                                 std::int64_t dim, const KMeansOptions& options) {
    std::mt19937_64 rng(options.seed);
    auto point = [&](std::int64_t i) { return features.data() + i * dim; };
    std::vector<double> centres = centre_at(point(static_cast<std::int64_t>(rng() % rows)), dim);
    std::vector<double> nearest(rows);
    for (std::int64_t i = 0; i < rows; ++i) nearest[i] = squared_distance(point(i), centres.data(), dim);
    for (std::int64_t c = 1; c < options.clusters; ++c) {
        double total = 0;
        for (double d : nearest) total += d;
        if (!(total > 0))
            return common::make_error("the features hold only " + std::to_string(c) + " distinct samples for " +
                                      std::to_string(options.clusters) + " clusters");
        double target = unit_draw(rng) * total, running = 0;
        std::int64_t chosen = -1;
        for (std::int64_t i = 0; i < rows; ++i) {
            if (nearest[i] <= 0) continue;
            chosen = i;  // rounding can leave target past the last sum: the last candidate then
            running += nearest[i];
            if (running > target) break;
        }
        auto next = centre_at(point(chosen), dim);
        centres.insert(centres.end(), next.begin(), next.end());
        for (std::int64_t i = 0; i < rows; ++i)
            nearest[i] = std::min(nearest[i], squared_distance(point(i), next.data(), dim));
    }
    return centres;
}

}  // namespace

std::int64_t nearest_centre(const float* point, const std::vector<double>& centres, std::int64_t dim) {
    std::int64_t best = 0;
    double best_distance = squared_distance(point, centres.data(), dim);
    auto clusters = static_cast<std::int64_t>(centres.size()) / dim;
    for (std::int64_t c = 1; c < clusters; ++c) {
        double d = squared_distance(point, centres.data() + c * dim, dim);
        if (d < best_distance) best = c, best_distance = d;
    }
    return best;
}

common::Result<KMeansResult> kmeans(const std::vector<float>& features, std::int64_t rows, std::int64_t dim,
                                    const KMeansOptions& options) {
    if (options.clusters < 1) return common::make_error("k-means needs at least one cluster");
    if (rows < 1 || dim < 1) return common::make_error("k-means needs at least one sample with one feature");
    if (static_cast<std::int64_t>(features.size()) != rows * dim)
        return common::make_error("k-means: " + std::to_string(features.size()) + " values are not " +
                                  std::to_string(rows) + " samples of " + std::to_string(dim));
    if (options.clusters > rows)
        return common::make_error(std::to_string(options.clusters) + " clusters asked of only " + std::to_string(rows) +
                                  " samples");
    for (float v : features)
        if (!std::isfinite(v)) return common::make_error("k-means: the features hold NaN or infinity");
    if (options.max_iterations < 1) return common::make_error("k-means needs at least one iteration");

    auto seeded = seed_centres(features, rows, dim, options);
    if (!seeded) return seeded.error();
    return lloyd(features, rows, dim, std::move(seeded).value(), options.max_iterations);
}

common::Result<KMeansResult> lloyd(const std::vector<float>& features, std::int64_t rows, std::int64_t dim,
                                   std::vector<double> centres, std::int64_t max_iterations) {
    auto clusters = static_cast<std::int64_t>(centres.size()) / dim;
    if (clusters < 1 || clusters > rows || static_cast<std::int64_t>(centres.size()) != clusters * dim)
        return common::make_error("Lloyd's iterations need between 1 and " + std::to_string(rows) + " centres of " +
                                  std::to_string(dim) + " values");
    if (max_iterations < 1) return common::make_error("k-means needs at least one iteration");
    KMeansResult result;
    result.dim = dim;
    result.centres = std::move(centres);
    result.assignment.assign(rows, -1);
    auto point = [&](std::int64_t i) { return features.data() + i * dim; };
    std::vector<double> distance(rows);
    for (result.iterations = 1; result.iterations <= max_iterations; ++result.iterations) {
        std::int64_t changed = 0;
        result.sizes.assign(clusters, 0);
        for (std::int64_t i = 0; i < rows; ++i) {
            auto c = nearest_centre(point(i), result.centres, dim);
            distance[i] = squared_distance(point(i), result.centres.data() + c * dim, dim);
            changed += c != result.assignment[i];
            result.assignment[i] = c;
            ++result.sizes[c];
        }
        // An empty cluster takes the sample farthest from its centre among clusters of two or more.
        bool refilled = false;
        for (std::int64_t c = 0; c < clusters; ++c) {
            if (result.sizes[c] > 0) continue;
            std::int64_t far = -1;
            for (std::int64_t i = 0; i < rows; ++i)
                if (result.sizes[result.assignment[i]] > 1 && (far < 0 || distance[i] > distance[far])) far = i;
            --result.sizes[result.assignment[far]];
            result.assignment[far] = c;
            result.sizes[c] = 1;
            distance[far] = 0;
            refilled = true;
            ++result.refilled;
        }
        // Each centre becomes the mean of its samples, summed in sample order.
        std::vector<double> sums(clusters * dim, 0.0);
        for (std::int64_t i = 0; i < rows; ++i)
            for (std::int64_t j = 0; j < dim; ++j) sums[result.assignment[i] * dim + j] += point(i)[j];
        for (std::int64_t c = 0; c < clusters; ++c)
            for (std::int64_t j = 0; j < dim; ++j)
                result.centres[c * dim + j] = sums[c * dim + j] / static_cast<double>(result.sizes[c]);
        if (changed == 0 && !refilled) {
            result.converged = true;
            break;
        }
    }
    result.iterations = std::min(result.iterations, max_iterations);
    for (std::int64_t i = 0; i < rows; ++i)
        result.inertia += squared_distance(point(i), result.centres.data() + result.assignment[i] * dim, dim);
    return result;
}

}  // namespace tessera::data
