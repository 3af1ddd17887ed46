// Replica comparison with an allowance for error feedback.
#include "replica_comparison.h"

#include <algorithm>
#include <cmath>

#include "tensor_math.h"

namespace tessera::server {

common::Result<ReplicaComparison> compare_replicas(const common::DecodedDelta& a, const common::DecodedDelta& b,
                                                   double tolerance) {
    auto distance = relative_l2(a.tensors, b.tensors);
    if (!distance) return distance.error();
    // Each volunteer's delta is Δ + r_old − r_new with both residuals within ±step/2 per value:
    // about uniform, so their difference has variance step²/6, and the two volunteers' differ
    // by √((P_a + P_b) / 6) in L2.
    double scale = std::max({l2_norm(a.tensors), l2_norm(b.tensors), 1e-12});
    ReplicaComparison out;
    out.relative_l2 = *distance;
    out.allowance = kReplicaSteps * std::sqrt((a.step_power + b.step_power) / 6.0) / scale;
    out.limit = tolerance + out.allowance;
    return out;
}

bool trajectories_comparable(const common::Commitments& a, const common::Commitments& b) {
    return a.moments_in && b.moments_in && *a.moments_in == *b.moments_in;
}

void compare_trajectories(const common::Commitments& a, const common::Commitments& b, double tolerance,
                          ReplicaComparison& comparison) {
    comparison.by_commitments = true;
    comparison.trajectory_tolerance = tolerance;
    comparison.trajectory_mismatch = common::trajectory_mismatch(a, b, tolerance);
}

}  // namespace tessera::server
