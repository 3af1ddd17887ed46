// Paired comparison of per-sample losses before and after a delta, on the same samples with
// the same noise and timesteps (docs/operations.md, "Validation"): the difference of each
// sample's two losses cancels what makes samples hard or easy, so a delta is judged by the
// spread of those differences, not of the losses. The loss checks refuse only beyond a
// one-sided confidence bound of kRefusalZ standard errors of the mean difference.
#pragma once

#include <cstddef>
#include <vector>

#include "result.h"

namespace tessera::server {

// One-sided bound for a false-refusal rate of 0.1 % (normal approximation of the mean of the
// differences; the checks use at least 64 samples).
constexpr double kRefusalZ = 3.09;

struct PairedChange {
    double before = 0;          // mean loss before the delta
    double after = 0;           // mean loss after it
    double standard_error = 0;  // of the mean of (after − before)
    std::size_t samples = 0;

    double change() const { return after - before; }
    // The change that the data rule out with kRefusalZ confidence: at least low(), at most high().
    double low() const { return change() - kRefusalZ * standard_error; }
    double high() const { return change() + kRefusalZ * standard_error; }
};

// An error when the two lists differ in length or are empty.
common::Result<PairedChange> paired_change(const std::vector<double>& before, const std::vector<double>& after);

}  // namespace tessera::server
