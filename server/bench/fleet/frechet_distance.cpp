// The trace of the matrix square root through symmetric eigendecompositions, in f64:
// Σa^½ Σb Σa^½ is symmetric positive semi-definite, so its square root's trace is the sum of
// the square roots of its eigenvalues (negative rounding residue clamped to zero).
#include "frechet_distance.h"

#include <torch/torch.h>

#include <stdexcept>

namespace tessera::bench {
namespace {

torch::Tensor symmetric_sqrt(const torch::Tensor& matrix) {
    auto [values, vectors] = torch::linalg_eigh(matrix);
    return vectors.matmul(torch::diag(values.clamp_min(0).sqrt())).matmul(vectors.transpose(0, 1));
}

}  // namespace

GaussianStats gaussian_stats(const torch::Tensor& features) {
    if (features.dim() != 2 || features.size(0) < 2)
        throw std::invalid_argument("gaussian_stats needs (N, D) features with N >= 2");
    auto x = features.to(torch::kFloat64);
    GaussianStats stats;
    stats.samples = x.size(0);
    stats.mean = x.mean(0);
    auto centred = x - stats.mean;
    stats.covariance = centred.transpose(0, 1).matmul(centred) / static_cast<double>(stats.samples - 1);
    return stats;
}

double frechet_distance(const GaussianStats& a, const GaussianStats& b) {
    auto root_a = symmetric_sqrt(a.covariance);
    auto middle = root_a.matmul(b.covariance).matmul(root_a);
    middle = 0.5 * (middle + middle.transpose(0, 1));
    auto cross = torch::linalg_eigvalsh(middle).clamp_min(0).sqrt().sum();
    auto means = (a.mean - b.mean).pow(2).sum();
    return (means + a.covariance.trace() + b.covariance.trace() - 2 * cross).item<double>();
}

}  // namespace tessera::bench
