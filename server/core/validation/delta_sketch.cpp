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

double sketch_norm(const DeltaSketch& sketch) {
    double sum = 0;
    for (double v : sketch.buckets) sum += v * v;
    return std::sqrt(sum);
}

double cosine_similarity(const DeltaSketch& a, const DeltaSketch& b) {
    if (a.empty() || b.empty()) return 0;
    double dot = 0, aa = 0, bb = 0;
    for (std::size_t i = 0; i < kSketchSize; ++i) {
        dot += a.buckets[i] * b.buckets[i];
        aa += a.buckets[i] * a.buckets[i];
        bb += b.buckets[i] * b.buckets[i];
    }
    if (aa <= 0 || bb <= 0) return 0;
    return std::clamp(dot / std::sqrt(aa * bb), -1.0, 1.0);  // rounding can step past ±1
}

}  // namespace tessera::server
