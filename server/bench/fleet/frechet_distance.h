// The Fréchet distance between two sets of features, each summarised as a Gaussian (mean and
// covariance): ‖μa − μb‖² + tr(Σa + Σb − 2 (Σa^½ Σb Σa^½)^½), the FID of Heusel et al. (2017).
// The project's FID (docs/fleet_simulator.md, "FID") takes the features from the judge cnn's
// penultimate layer (common::CnnImpl::features), for real and generated images alike.
#pragma once

#include <torch/types.h>

namespace tessera::bench {

struct GaussianStats {
    torch::Tensor mean;        // (D,) f64
    torch::Tensor covariance;  // (D, D) f64, with the unbiased 1 / (N − 1)
    std::int64_t samples = 0;
};

// `features` (N, D), N ≥ 2.
GaussianStats gaussian_stats(const torch::Tensor& features);

// ≥ 0 up to rounding; 0 for equal statistics; symmetric in its arguments.
double frechet_distance(const GaussianStats& a, const GaussianStats& b);

}  // namespace tessera::bench
