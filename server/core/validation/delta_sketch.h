// A delta's count sketch: a fixed-size random projection (every value added, with a pseudo-
// random sign, into one of kSketchSize buckets chosen by its position) whose inner products
// approximate the full vectors'. Copy detection compares sketches, so the server keeps a few
// kilobytes per recent result or version update instead of whole deltas. The sketch is
// linear: sketch(a − b) = sketch(a) − sketch(b), so the aggregator sketches a version update
// from the sketches of the models before and after it.
#pragma once

#include <vector>

#include "delta_codec.h"

namespace tessera::server {

// Cosine estimates from independent sketches of this size have a standard error of about
// sqrt((1 + cos²) / kSketchSize): under 0.023 for 4096 buckets.
constexpr std::size_t kSketchSize = 4096;

struct DeltaSketch {
    std::vector<double> buckets;  // kSketchSize values, or empty for "none"

    bool empty() const { return buckets.empty(); }
};

// Values are taken in tensor order, position by position (the same layout gives the same
// buckets): both sketches of a comparison must come from tensors with the model's layout.
DeltaSketch sketch_of(const common::NamedTensors& tensors);
// after − before, bucket by bucket.
DeltaSketch sketch_difference(const DeltaSketch& after, const DeltaSketch& before);
// The sum of the buckets' squares, and its square root (0 for an empty sketch).
double sketch_squares(const DeltaSketch& sketch);
double sketch_norm(const DeltaSketch& sketch);
// Σ a·b over the buckets; both sketches non-empty.
double sketch_dot(const DeltaSketch& a, const DeltaSketch& b);
// In [-1, 1]; 0 when either sketch is empty or zero.
double cosine_similarity(const DeltaSketch& a, const DeltaSketch& b);
// The same from a·b and each sketch's sum of squares, for a caller that keeps the sums.
double cosine_of(double dot, double a_squares, double b_squares);

}  // namespace tessera::server
