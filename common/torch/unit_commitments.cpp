// Commitments recorded while a unit trains (unit_commitments.h).
#include "unit_commitments.h"

#include <cmath>

namespace tessera::common {
namespace {

double norm_of(const NamedTensors& tensors) {
    double sum = 0;
    for (const auto& t : tensors)
        for (float v : t.values) sum += static_cast<double>(v) * v;
    return std::sqrt(sum);
}

}  // namespace

CommitmentRecorder::CommitmentRecorder(const TorchTensorMap& theta0, const TrainConfig& config)
    : theta0_(theta0), seed_(config.seed), steps_(config.steps) {}

void CommitmentRecorder::attach(TrainConfig& config) {
    config.snapshot_every = commitment_every(steps_);
    config.snapshot = [this](std::int64_t step, const TorchTensorMap& weights) { record(step, weights); };
}

void CommitmentRecorder::record(std::int64_t step, const TorchTensorMap& weights) {
    if (step >= steps_) return;  // the last segment comes from the outcome's delta
    // A training tried again (a smaller micro-batch, fresh moments) starts its segments anew.
    while (!segments_.empty() && segments_.back().step >= step) segments_.pop_back();
    torch::NoGradGuard no_grad;
    TorchTensorMap moved;
    for (const auto& [name, weight] : weights)
        moved.emplace(name, weight.to(torch::kCPU, torch::kFloat32) - theta0_.at(name).to(torch::kFloat32));
    auto values = to_named_f32(moved);
    segments_.push_back({step, 0.0, norm_of(values), commitment_sketch(values, seed_)});
}

Result<Commitments> CommitmentRecorder::finish(const TrainOutcome& outcome) const {
    auto ends = commitment_steps(steps_);
    if (segments_.size() + 1 != ends.size() || outcome.step_losses.size() != static_cast<std::size_t>(steps_))
        return make_error("commitments: the training reported " + std::to_string(segments_.size()) + " segments and " +
                          std::to_string(outcome.step_losses.size()) + " losses for " + std::to_string(steps_) +
                          " steps");
    Commitments commitments;
    commitments.every = commitment_every(steps_);
    commitments.segments = segments_;
    auto delta = to_named_f32(outcome.delta);
    commitments.segments.push_back({steps_, 0.0, norm_of(delta), commitment_sketch(delta, seed_)});
    std::int64_t opening = 0;  // the segment's first step, trained at its opening point
    for (auto& segment : commitments.segments) {
        segment.loss = outcome.step_losses[static_cast<std::size_t>(opening)];
        opening = segment.step;
    }
    return commitments;
}

MomentsCommitment moments_commitment(const InnerOptimizerState* resumed) {
    if (resumed == nullptr || resumed->empty()) return {};
    return {moments_sha256(to_named_f32(resumed->exp_avg), to_named_f32(resumed->exp_avg_sq)), resumed->steps};
}

Result<Commitments> replay_commitments(const std::string& preset, const TorchTensorMap& theta0, const ShardData& data,
                                       TrainConfig config) {
    CommitmentRecorder recorder(theta0, config);
    recorder.attach(config);
    auto outcome = train(preset, theta0, data, config);
    if (!outcome) return outcome.error();
    return recorder.finish(*outcome);
}

}  // namespace tessera::common
