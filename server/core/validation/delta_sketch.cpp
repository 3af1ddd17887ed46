// Count sketches of deltas: bucket and sign from a hash of the value's position.
#include "delta_sketch.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "unit_random.h"

namespace tessera::server {
namespace {

// A fast, well-mixed hash of the position (SplitMix64's output for it).
std::uint64_t mix(std::uint64_t x) { return common::splitmix64_mix(x + 0x9e3779b97f4a7c15ULL); }

}  // namespace

DeltaSketch sketch_of(const common::NamedTensors& tensors) {
    DeltaSketch sketch;
    sketch.buckets.assign(kSketchSize, 0.0);
    std::uint64_t position = 0;
    for (const auto& tensor : tensors) {
        for (float value : tensor.values) {
            // A zero adds nothing to its bucket: a sparse (top-k) delta hashes only what it sent.
            if (value != 0.0F) {
                auto hash = mix(position);
                double signed_value = (hash >> 63) ? -static_cast<double>(value) : static_cast<double>(value);
                sketch.buckets[hash % kSketchSize] += signed_value;
            }
            ++position;
        }
    }
    return sketch;
}

DeltaSketch sketch_difference(const DeltaSketch& after, const DeltaSketch& before) {
    if (after.empty() || before.empty()) return {};
    DeltaSketch difference;
    difference.buckets.resize(kSketchSize);
    for (std::size_t i = 0; i < kSketchSize; ++i) difference.buckets[i] = after.buckets[i] - before.buckets[i];
    return difference;
}

static_assert(kSketchSize % 4 == 0);

// Sums over the buckets in four lanes, so that the additions do not wait on each other.
template <class Term>
double bucket_sum(Term term) {
    double lanes[4] = {0, 0, 0, 0};
    for (std::size_t i = 0; i < kSketchSize; i += 4)
        for (std::size_t lane = 0; lane < 4; ++lane) lanes[lane] += term(i + lane);
    return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
}

double sketch_squares(const DeltaSketch& sketch) {
    if (sketch.empty()) return 0;
    const double* b = sketch.buckets.data();
    return bucket_sum([b](std::size_t i) { return b[i] * b[i]; });
}

double sketch_norm(const DeltaSketch& sketch) { return std::sqrt(sketch_squares(sketch)); }

double sketch_dot(const DeltaSketch& a, const DeltaSketch& b) {
    const double* x = a.buckets.data();
    const double* y = b.buckets.data();
    return bucket_sum([x, y](std::size_t i) { return x[i] * y[i]; });
}

double cosine_of(double dot, double a_squares, double b_squares) {
    if (a_squares <= 0 || b_squares <= 0) return 0;
    return std::clamp(dot / std::sqrt(a_squares * b_squares), -1.0, 1.0);  // rounding can step past ±1
}

double cosine_similarity(const DeltaSketch& a, const DeltaSketch& b) {
    if (a.empty() || b.empty()) return 0;
    return cosine_of(sketch_dot(a, b), sketch_squares(a), sketch_squares(b));
}

}  // namespace tessera::server
