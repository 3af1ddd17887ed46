// The commitment sketch: a keyed 16-bucket count sketch over tensors in name order.
#include "commitment_sketch.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "unit_random.h"

namespace tessera::common {

CommitmentSketch commitment_sketch(const NamedTensors& tensors, std::uint64_t seed) {
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return tensors[a].name < tensors[b].name; });
    UnitStream stream(seed, static_cast<DrawPurpose>(kCommitmentPurpose), 0);
    CommitmentSketch sketch{};
    std::uint64_t position = 0;
    for (auto t : order)
        for (float value : tensors[t].values) {
            auto word = stream.word(position++);
            auto signed_value = (word >> 63) ? -static_cast<double>(value) : static_cast<double>(value);
            sketch[word & (kCommitmentBuckets - 1)] += signed_value;
        }
    return sketch;
}

CommitmentSketch add_sketches(const CommitmentSketch& a, const CommitmentSketch& b, double scale) {
    CommitmentSketch sum{};
    for (std::size_t i = 0; i < kCommitmentBuckets; ++i) sum[i] = a[i] + scale * b[i];
    return sum;
}

double sketch_length(const CommitmentSketch& sketch) {
    double squares = 0;
    for (double v : sketch) squares += v * v;
    return std::sqrt(squares);
}

bool sketches_agree(const CommitmentSketch& a, const CommitmentSketch& b, double tolerance, double scale) {
    return sketch_length(add_sketches(a, b, -1.0)) <= tolerance * scale;
}

}  // namespace tessera::common
