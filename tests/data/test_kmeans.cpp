// k-means: the same clusters for a seed, separated groups found, an emptied cluster refilled,
// and bad input refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>
#include <set>

#include "kmeans.h"

using tessera::data::kmeans;
using tessera::data::KMeansOptions;
using tessera::data::nearest_centre;

namespace {

// `groups` blobs of `per_group` 2-D points around (10 g, 10 g), and each point's blob.
std::vector<float> blobs(int groups, int per_group, std::vector<int>& truth, std::uint32_t seed = 3) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal;
    std::vector<float> points;
    for (int i = 0; i < groups * per_group; ++i) {
        int g = i % groups;
        points.push_back(10.0f * g + normal(rng));
        points.push_back(10.0f * g + normal(rng));
        truth.push_back(g);
    }
    return points;
}

}  // namespace

TEST_CASE("k-means finds separated groups, every sample nearest its own centre") {
    std::vector<int> truth;
    auto points = blobs(4, 50, truth);
    auto result = kmeans(points, 200, 2, {.clusters = 4, .seed = 1}).value();
    CHECK(result.converged);
    CHECK(result.sizes == std::vector<std::int64_t>{50, 50, 50, 50});
    // Each blob is one cluster: the map from blob to cluster is one-to-one.
    std::set<std::pair<int, std::int64_t>> pairs;
    for (int i = 0; i < 200; ++i) pairs.insert({truth[i], result.assignment[i]});
    CHECK(pairs.size() == 4);
    for (int i = 0; i < 200; ++i)
        CHECK(nearest_centre(points.data() + 2 * i, result.centres, 2) == result.assignment[i]);
    CHECK(result.inertia > 0);
    CHECK(result.inertia < 200 * 2 * 2.0);  // about 2 per point: two unit variances
}

TEST_CASE("k-means is deterministic for a seed") {
    std::vector<int> truth;
    std::mt19937 rng(5);
    std::uniform_real_distribution<float> uniform;
    std::vector<float> points(3000);
    for (auto& v : points) v = uniform(rng);  // no structure: the seed decides
    auto a = kmeans(points, 1000, 3, {.clusters = 5, .seed = 11}).value();
    auto b = kmeans(points, 1000, 3, {.clusters = 5, .seed = 11}).value();
    CHECK(a.assignment == b.assignment);
    CHECK(a.centres == b.centres);
    CHECK(a.iterations == b.iterations);
    auto other = kmeans(points, 1000, 3, {.clusters = 5, .seed = 12}).value();
    CHECK(other.assignment.size() == a.assignment.size());
}

TEST_CASE("a cluster left empty by Lloyd's step takes the farthest sample") {
    // Four samples on a line and a start whose second centre is nearest to none of them.
    std::vector<float> points{0, 1, 10, 11};
    auto result = tessera::data::lloyd(points, 4, 1, {0.5, 100, 10.5}, 20).value();
    CHECK(result.refilled == 1);
    CHECK(result.converged);
    for (auto size : result.sizes) CHECK(size >= 1);
    CHECK(result.sizes[0] + result.sizes[1] + result.sizes[2] == 4);
}

TEST_CASE("k-means refuses what it cannot cluster") {
    std::vector<float> three{1, 2, 3};
    auto too_many = kmeans(three, 3, 1, {.clusters = 4});
    REQUIRE_FALSE(too_many);
    CHECK(too_many.message().find("4 clusters asked of only 3 samples") != std::string::npos);
    std::vector<float> alike{2, 2, 2, 2};
    auto identical = kmeans(alike, 4, 1, {.clusters = 2});
    REQUIRE_FALSE(identical);
    CHECK(identical.message().find("only 1 distinct samples for 2 clusters") != std::string::npos);
    std::vector<float> nan{1, std::numeric_limits<float>::quiet_NaN()};
    CHECK(kmeans(nan, 2, 1, {.clusters = 1}).message().find("NaN") != std::string::npos);
    CHECK_FALSE(kmeans(three, 3, 1, {.clusters = 0}));
    CHECK_FALSE(kmeans(three, 2, 1, {.clusters = 1}));  // 3 values are not 2 samples of 1
    auto one = kmeans(three, 3, 1, {.clusters = 1}).value();
    CHECK(one.centres == std::vector<double>{2.0});
}
