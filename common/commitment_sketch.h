// The commitment sketch (docs/plans/verification.md, step 2): a count sketch of
// kCommitmentBuckets buckets keyed by a unit's seed, small enough for a volunteer to send with
// every segment of a unit and exact enough to compare to f32 rounding, so that a replay can
// find the segment where two trainings part. Specified to the bit, so that any implementation
// reproduces it: for position p over the tensors in name order, value by value,
// w = UnitStream(seed, kCommitmentPurpose, 0).word(p) (common/unit_random.h); the value goes,
// as a double, into bucket w & 15, negated when w >> 63 is 1; buckets sum in position order.
// Linear for one layout and seed: sketch(a + b) = sketch(a) + sketch(b), up to rounding.
#pragma once

#include <array>
#include <cstdint>

#include "delta_codec.h"

namespace tessera::common {

constexpr std::size_t kCommitmentBuckets = 16;
// The draw purpose of the sketch's stream, after DrawPurpose's (common/unit_random.h).
constexpr std::uint64_t kCommitmentPurpose = 8;

using CommitmentSketch = std::array<double, kCommitmentBuckets>;

CommitmentSketch commitment_sketch(const NamedTensors& tensors, std::uint64_t seed);
// a + scale · b, bucket by bucket.
CommitmentSketch add_sketches(const CommitmentSketch& a, const CommitmentSketch& b, double scale = 1.0);
// The buckets' L2 norm (for a sketch of a vector v, about ‖v‖).
double sketch_length(const CommitmentSketch& sketch);
// Whether ‖a − b‖ ≤ tolerance · scale, the caller's scale being the compared vectors' size
// (e.g. ‖Δ‖ + ‖r_in‖ for an upload against its commitments).
bool sketches_agree(const CommitmentSketch& a, const CommitmentSketch& b, double tolerance, double scale);

}  // namespace tessera::common
