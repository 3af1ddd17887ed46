// A unit's commitments (common/commitments.h) recorded while common::train runs it: the
// training's snapshot hook sketches θ_s − θ_0 at the end of each segment but the last, which
// comes from the outcome's delta; each segment's loss is its first step's (computed at the
// point the segment opens, θ_{s_prev}, so a replay from there reproduces it exactly). The
// residuals are the caller's (they come from the encoding).
#pragma once

#include <cstdint>
#include <vector>

#include "../commitments.h"
#include "tensor_convert.h"
#include "trainer.h"

namespace tessera::common {

class CommitmentRecorder {
public:
    // `theta0` must outlive the recorder; `config.steps` and `config.seed` name the unit.
    CommitmentRecorder(const TorchTensorMap& theta0, const TrainConfig& config);
    CommitmentRecorder(const CommitmentRecorder&) = delete;
    CommitmentRecorder& operator=(const CommitmentRecorder&) = delete;

    // Sets `config`'s snapshot hook to this recorder (which must outlive the training).
    void attach(TrainConfig& config);
    // The finished unit's commitments, its residuals none.
    Result<Commitments> finish(const TrainOutcome& outcome) const;

private:
    void record(std::int64_t step, const TorchTensorMap& weights);

    const TorchTensorMap& theta0_;
    std::uint64_t seed_;
    std::int64_t steps_;
    std::vector<CommitmentSegment> segments_;  // all but the last, their losses not yet known
};

// What a unit started its optimizer from: `resumed` moments (nullptr or empty: zero moments).
MomentsCommitment moments_commitment(const InnerOptimizerState* resumed);

// A replay audit's side: trains the unit of `config` again from `theta0` on `data` (with its
// resumed moments, if any) and returns what an honest volunteer's commitments would be, its
// residuals none.
Result<Commitments> replay_commitments(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                                       TrainConfig config);

}  // namespace tessera::common
