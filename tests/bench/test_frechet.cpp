// The Fréchet distance against its closed form on hand-made Gaussians, and the judge cnn's
// features it is computed on.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "frechet_distance.h"
#include "torch/models/cnn.h"

using tessera::bench::frechet_distance;
using tessera::bench::gaussian_stats;
using tessera::bench::GaussianStats;

namespace {

GaussianStats stats(torch::Tensor mean, torch::Tensor covariance) {
    return {mean.to(torch::kFloat64), covariance.to(torch::kFloat64), 0};
}

// A rotation of the plane by `angle`.
torch::Tensor rotation(double angle) {
    return torch::tensor({{std::cos(angle), -std::sin(angle)}, {std::sin(angle), std::cos(angle)}}, torch::kFloat64);
}

}  // namespace

TEST_CASE("the Fréchet distance matches its closed form on hand-made Gaussians") {
    // Commuting covariances R diag(a) Rᵀ and R diag(b) Rᵀ: Σ (√a − √b)² plus the means' distance.
    auto r = rotation(0.7);
    auto a = stats(torch::tensor({1.0, 2.0}),
                   r.matmul(torch::diag(torch::tensor({4.0, 9.0}, torch::kFloat64))).matmul(r.transpose(0, 1)));
    auto b = stats(torch::tensor({4.0, -2.0}),
                   r.matmul(torch::diag(torch::tensor({1.0, 16.0}, torch::kFloat64))).matmul(r.transpose(0, 1)));
    double expected = (9.0 + 16.0) + (2.0 - 1.0) * (2.0 - 1.0) + (3.0 - 4.0) * (3.0 - 4.0);
    CHECK(frechet_distance(a, b) == doctest::Approx(expected).epsilon(1e-9));
    CHECK(frechet_distance(b, a) == doctest::Approx(expected).epsilon(1e-9));
    CHECK(frechet_distance(a, a) == doctest::Approx(0).scale(1).epsilon(1e-9));

    // Non-commuting: diag(1, 0) against the projection onto (1, 1)/√2; tr((Σa^½ Σb Σa^½)^½) = √½.
    auto p = stats(torch::zeros({2}), torch::tensor({{1.0, 0.0}, {0.0, 0.0}}));
    auto q = stats(torch::zeros({2}), torch::tensor({{0.5, 0.5}, {0.5, 0.5}}));
    CHECK(frechet_distance(p, q) == doctest::Approx(2.0 - 2.0 * std::sqrt(0.5)).epsilon(1e-9));
}

TEST_CASE("sample statistics: the mean, the unbiased covariance, and a distance that falls with the samples") {
    auto x = torch::tensor({{1.0, 0.0}, {3.0, 2.0}, {2.0, 4.0}});
    auto s = gaussian_stats(x);
    CHECK(s.samples == 3);
    CHECK(s.mean[0].item<double>() == doctest::Approx(2.0));
    CHECK(s.mean[1].item<double>() == doctest::Approx(2.0));
    CHECK(s.covariance[0][0].item<double>() == doctest::Approx(1.0));  // (1 + 1 + 0) / 2
    CHECK(s.covariance[0][1].item<double>() == doctest::Approx(1.0));  // (2 + 0 + 0) / 2
    CHECK(s.covariance[1][1].item<double>() == doctest::Approx(4.0));
    CHECK_THROWS(gaussian_stats(torch::ones({1, 2})));

    // Two draws of one Gaussian come closer with more samples; a shifted one stays 1 away.
    torch::manual_seed(3);
    auto few = frechet_distance(gaussian_stats(torch::randn({50, 4})), gaussian_stats(torch::randn({50, 4})));
    auto many = frechet_distance(gaussian_stats(torch::randn({20000, 4})), gaussian_stats(torch::randn({20000, 4})));
    CHECK(many < few);
    CHECK(many < 0.01);
    auto shifted = torch::randn({20000, 4});
    shifted.select(1, 0) += 1.0;
    CHECK(frechet_distance(gaussian_stats(torch::randn({20000, 4})), gaussian_stats(shifted)) ==
          doctest::Approx(1.0).epsilon(0.05));
}

TEST_CASE("the cnn's features are its penultimate layer: the logits are fc2 of them") {
    torch::manual_seed(1);
    tessera::common::Cnn cnn;
    auto x = torch::randn({3, 1, 28, 28});
    auto features = cnn->features(x);
    CHECK(features.sizes() == torch::IntArrayRef{3, tessera::common::CnnImpl::kFeatures});
    CHECK(features.min().item<float>() >= 0);  // after the ReLU
    auto params = cnn->named_parameters();
    auto logits = torch::nn::functional::linear(features, params["fc2.weight"], params["fc2.bias"]);
    CHECK(torch::allclose(logits, cnn->forward(x), 1e-5, 1e-6));
}
