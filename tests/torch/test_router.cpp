// The experts' router: its shapes, its refusals, and that it learns which cluster a noisy latent
// came from when trained by the ordinary trainer, reproducibly.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "torch/model_state.h"
#include "torch/trainer.h"
#include "torch/workload.h"

using namespace tessera::common;

namespace {

// Two clusters of 4×8×8 latents: cluster 0 around +0.8, cluster 1 around −0.8, with unit noise.
ShardData two_clusters(std::int64_t n, std::uint64_t seed) {
    auto generator = at::detail::createCPUGenerator(seed);
    ShardData data;
    data.labels = torch::arange(n, torch::kInt64) % 2;
    auto centre = (1 - 2 * data.labels.to(torch::kFloat32)).view({n, 1, 1, 1}) * 0.8;
    data.inputs = torch::randn({n, 4, 8, 8}, generator, torch::kFloat32) + centre;
    return data;
}

}  // namespace

TEST_CASE("the router gives one logit per expert from a noisy latent and its t") {
    auto workload = make_workload("router", DataShape{4, 8, 3, 0}, 0).value();
    auto* router = router_of(*workload);
    REQUIRE(router != nullptr);
    CHECK(dit_of(*workload) == nullptr);
    CHECK((*router)->experts() == 3);
    auto logits = (*router)->forward(torch::randn({5, 4, 8, 8}), torch::rand({5}));
    CHECK(logits.sizes() == torch::IntArrayRef({5, 3}));
    auto names = workload->module()->named_parameters();
    CHECK(names["router_head.weight"].sizes() == torch::IntArrayRef({3, 64}));
    CHECK_FALSE(names.contains("class_embed.weight"));
    auto four = make_workload("router", DataShape{4, 8, 4, 0}, 0).value();
    std::int64_t parameters = 0;
    for (const auto& p : four->module()->parameters()) parameters += p.numel();
    CHECK(four->module()->parameters().size() == 34);  // docs/protocol.md, "Model presets"
    CHECK(parameters == 152388);
    CHECK(preset_summary().find("router (an expert cluster's router)") != std::string::npos);
}

TEST_CASE("the router refuses data it cannot route") {
    auto one_cluster = make_workload("router", DataShape{4, 8, 1, 0}, 0);
    REQUIRE_FALSE(one_cluster.ok());
    CHECK(one_cluster.error().message.find("two or more clusters") != std::string::npos);
    CHECK_FALSE(make_workload("router", DataShape{4, 7, 4, 0}, 0).ok());
}

TEST_CASE("the trainer teaches the router the clusters, the same way for a seed") {
    auto train_data = two_clusters(512, 1);
    auto validation = two_clusters(256, 2);
    auto workload = make_workload("router", data_shape_of(train_data, 2), 0).value();
    auto theta0 = state_of(*workload->module());
    auto before = workload->evaluate(validation, torch::kCPU, 256);
    CHECK(before.accuracy >= 0.0);
    CHECK(before.samples == 256);

    TrainConfig config;
    config.steps = 60;
    config.batch_size = 32;
    config.lr = 1e-3;
    config.num_classes = 2;
    config.seed = 7;
    auto outcome = train("router", theta0, train_data, config, {});
    REQUIRE(outcome.ok());
    auto again = train("router", theta0, train_data, config, {});
    REQUIRE(again.ok());
    for (const auto& [name, delta] : outcome->delta) CHECK(torch::equal(delta, again->delta.at(name)));

    auto trained = theta0;
    for (auto& [name, value] : trained) value = value + outcome->delta.at(name);
    REQUIRE(load_state(*workload->module(), trained).ok());
    auto after = workload->evaluate(validation, torch::kCPU, 256);
    MESSAGE("router: loss " << before.loss << " -> " << after.loss << ", accuracy " << before.accuracy << " -> "
                            << after.accuracy);
    CHECK(after.loss < before.loss);
    // At the grid's largest t the latent is nearly all noise, so not every (sample, t) is routable.
    CHECK(after.accuracy > 0.8);
    CHECK(after.loss == doctest::Approx(after.sample_losses.mean().item<double>()));
}
