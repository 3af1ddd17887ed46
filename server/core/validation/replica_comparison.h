// Comparing the two results of a replicated unit. Both volunteers trained the same thing, so
// their deltas differ only by their codecs' error feedback: each carries its own residual,
// bounded by half a quantisation step per value for the dense integer codecs. The limit on
// their relative L2 distance is the task's tolerance plus that allowance
// (docs/operations.md, "Replication").
#pragma once

#include "delta_codec.h"
#include "result.h"

namespace tessera::server {

// The residuals' allowance, in expected L2 distances of the two carried residual differences.
constexpr double kReplicaSteps = 1.5;

struct ReplicaComparison {
    double relative_l2 = 0;  // ‖a − b‖ / max(‖a‖, ‖b‖)
    double allowance = 0;    // kReplicaSteps · √((P_a + P_b) / 6) / max(‖a‖, ‖b‖), P the step powers
    double limit = 0;        // tolerance + allowance
    bool agree() const { return relative_l2 <= limit; }
};

// An error when the layouts differ.
common::Result<ReplicaComparison> compare_replicas(const common::DecodedDelta& a, const common::DecodedDelta& b,
                                                   double tolerance);

}  // namespace tessera::server
