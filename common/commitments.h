// A result's commitments (docs/protocol.md, "Commitments"): what a volunteer reports of its
// unit's trajectory, so that the server binds the upload to it at once and a replay audit finds
// the segment where a disagreement starts. Every k = ⌈steps / 8⌉ steps and after the last, a
// segment: its first step's training loss, ‖θ_s − θ_0‖ and the sketch of θ_s − θ_0; and the
// error-feedback residual the upload carried in (r_in) and left out (r_out), each by the SHA-256
// of its values and its sketch. Error feedback makes upload = Δ + r_in − r_out whatever the
// codec, so sketch(upload) = sketch_last + sketch(r_in) − sketch(r_out) to f32 rounding.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "commitment_sketch.h"
#include "delta_codec.h"
#include "result.h"

namespace tessera::common {

// Segments a unit of at most this many segments reports (⌈steps / k⌉ with k = ⌈steps / 8⌉).
constexpr std::size_t kMaxCommitmentSegments = 8;
// How far an upload's sketch may sit from its commitments' identity, relative to the vectors
// compared (‖upload‖ + ‖Δ‖ + ‖r_in‖ + ‖r_out‖): f32 rounding is ~1e-7 of them.
constexpr double kCommitmentTolerance = 1e-5;

struct CommitmentSegment {
    std::int64_t step = 0;      // the segment ends after this step (1-based)
    double loss = 0;            // the training loss of its first step (at θ of the previous segment's end)
    double norm = 0;            // ‖θ_step − θ_0‖
    CommitmentSketch sketch{};  // of θ_step − θ_0
};

struct ResidualCommitment {
    std::string sha256;  // of the residual's values (residual_sha256); "" when there is none
    CommitmentSketch sketch{};
};

// The AdamW state a unit started from: kept moments resumed (their hash and step count), or
// zero moments ("" and 0), so that a replay audit knows where the optimizer began.
struct MomentsCommitment {
    std::string sha256;  // moments_sha256 of the resumed moments; "" for zero moments
    std::int64_t steps = 0;
    bool operator==(const MomentsCommitment&) const = default;
};

struct Commitments {
    std::int64_t every = 0;  // k
    std::vector<CommitmentSegment> segments;
    ResidualCommitment residual_in;   // added to Δ before encoding
    ResidualCommitment residual_out;  // what the encoding left out of Δ + r_in
    std::optional<MomentsCommitment> moments_in;  // absent: not stated (such a kept unit cannot be audited)
};

// k for a unit of `steps` steps: ⌈steps / 8⌉, at least 1.
std::int64_t commitment_every(std::int64_t steps);
// The steps that end its segments: k, 2k, … below `steps`, then `steps`.
std::vector<std::int64_t> commitment_steps(std::int64_t steps);

// SHA-256 hex of the values, f32 little-endian, tensors in name order; "" for no tensors.
std::string residual_sha256(const NamedTensors& residual);
// SHA-256 hex of the first moments' values then the second's, each as residual_sha256 reads
// them; "" for none.
std::string moments_sha256(const NamedTensors& exp_avg, const NamedTensors& exp_avg_sq);
// Its hash and sketch; "" and zeros for no tensors.
ResidualCommitment residual_commitment(const NamedTensors& residual, std::uint64_t seed);

// Empty when `commitments` belong to a unit of `steps` steps and `upload` (the decoded delta)
// keeps their identity; otherwise what disagrees.
std::string commitments_mismatch(const Commitments& commitments, const NamedTensors& upload, std::int64_t steps,
                                 std::uint64_t seed);

// Empty when a replay audit's commitments (`replayed`) agree with the volunteer's (`claimed`)
// segment by segment: loss and norm within `tolerance` relative, the sketches within
// `tolerance` of the two norms; otherwise the first segment that disagrees, and how.
std::string trajectory_mismatch(const Commitments& claimed, const Commitments& replayed, double tolerance);

}  // namespace tessera::common
