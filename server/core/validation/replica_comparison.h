// Comparing the two results of a replicated unit. Both volunteers trained the same thing, so
// their deltas differ only by their codecs' error feedback: each carries its own residual,
// bounded by half a quantisation step per value for the dense integer codecs. The limit on
// their relative L2 distance is the task's tolerance plus that allowance. When both sent
// commitments from the same moments, their trajectories are compared instead, segment by
// segment at the replay tolerance of their devices — far tighter than any delta tolerance
// (docs/operations.md, "Replication").
#pragma once

#include <string>

#include "commitments.h"
#include "delta_codec.h"
#include "result.h"

namespace tessera::server {

// The residuals' allowance, in expected L2 distances of the two carried residual differences.
constexpr double kReplicaSteps = 1.5;

struct ReplicaComparison {
    double relative_l2 = 0;  // ‖a − b‖ / max(‖a‖, ‖b‖)
    double allowance = 0;    // kReplicaSteps · √((P_a + P_b) / 6) / max(‖a‖, ‖b‖), P the step powers
    double limit = 0;        // tolerance + allowance
    // Judged by the two committed trajectories (compare_trajectories): where they part, empty
    // when they agree, and the relative tolerance they were held to.
    bool by_commitments = false;
    std::string trajectory_mismatch;
    double trajectory_tolerance = 0;
    bool agree() const { return by_commitments ? trajectory_mismatch.empty() : relative_l2 <= limit; }
};

// Whether two replicas' commitments can be compared: both sent them and started from the same
// moments (replicas start AdamW afresh).
bool trajectories_comparable(const common::Commitments& a, const common::Commitments& b);
// Judges `comparison` by the two trajectories at `tolerance` (replay_tolerance of the devices).
void compare_trajectories(const common::Commitments& a, const common::Commitments& b, double tolerance,
                          ReplicaComparison& comparison);

// An error when the layouts differ.
common::Result<ReplicaComparison> compare_replicas(const common::DecodedDelta& a, const common::DecodedDelta& b,
                                                   double tolerance);

}  // namespace tessera::server
