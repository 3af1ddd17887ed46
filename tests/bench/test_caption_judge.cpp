// The caption judge on a small captioned-canvases dataset: real canvases, decoded, score high
// on every figure; the same canvases with their quadrants turned round (every relation
// reversed, the items kept) score as high on object and near nothing on relation; noise
// finds no objects; an untrained text DiT scores low and the same twice; the cnns are cached
// and reused; a dataset without canvases' ground truth is refused by name.
#include <torch/torch.h>

#include <memory>

#include "caption_judge.h"
#include "doctest_after_torch.h"
#include "prepare.h"
#include "prompt_fidelity.h"
#include "synthetic_dataset.h"
#include "task_setup.h"
#include "temp_dir.h"
#include "torch_model.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

constexpr std::int64_t kCanvases = 600;  // → 100 validation and 100 held-out canvases
constexpr std::int64_t kAutoencoderSteps = 40;

// Prepared once per test process.
const std::filesystem::path& canvases() {
    static std::unique_ptr<testing::TempDir> dir;
    if (!dir) {
        dir = std::make_unique<testing::TempDir>();
        data::PrepareOptions options;
        options.out = dir->path();
        options.limit = kCanvases;
        options.shard_size = 300;
        options.autoencoder_steps = kAutoencoderSteps;
        auto status = data::prepare_canvases(options);
        if (!status) throw std::runtime_error("preparing the canvases failed: " + status.message());
    }
    return dir->path();
}

CaptionJudgeOptions judge_options(const std::filesystem::path& cache) {
    CaptionJudgeOptions options;
    options.data = canvases();
    options.cache = cache;
    options.train_canvases = kCanvases;
    options.epochs = 8;
    options.captions = 100;
    options.sampling_steps = 2;
    options.quiet = true;
    return options;
}

// Latents with their quadrants turned round (0 ↔ 3, 1 ↔ 2): each item moves whole, so what is
// drawn stays and every "A left of B" becomes "A right of B", every "above" "below".
torch::Tensor turned_round(const torch::Tensor& latents) {
    auto n = latents.size(0), c = latents.size(1), half = latents.size(2) / 2;
    return latents.view({n, c, 2, half, 2, half}).flip({2, 4}).reshape_as(latents);
}

}  // namespace

TEST_CASE("the caption judge scores real canvases high and reversed or missing items low") {
    torch::set_num_threads(2);
    testing::TempDir dir;
    auto judge = CaptionJudge::make(judge_options(dir / "judge"));
    REQUIRE_MESSAGE(judge.ok(), judge.message());
    REQUIRE(std::filesystem::exists(dir / "judge-class.safetensors"));
    REQUIRE(std::filesystem::exists(dir / "judge-attribute.safetensors"));
    const auto real = (*judge)->ceilings();
    MESSAGE("ceilings: object ", real.object, ", relation ", real.relation, ", attribute ", real.attribute,
            ", held-out ", real.heldout);
    // A 40-step autoencoder and cnns taught on 600 canvases read about 0.44 (chance: about 0.02).
    CHECK(real.object >= 0.3);
    CHECK(real.relation >= 0.95 * real.object);  // found items stand where their captions say
    CHECK(real.attribute >= 0.25);
    CHECK(real.heldout >= 0.2);

    auto turned = (*judge)->score_latents(turned_round((*judge)->real_latents(false)),
                                          turned_round((*judge)->real_latents(true)));
    REQUIRE_MESSAGE(turned.ok(), turned.message());
    CHECK(turned->object == doctest::Approx(real.object).epsilon(0.15));
    CHECK(turned->relation <= 0.05);
    CHECK(turned->heldout <= 0.05);

    auto generator = at::make_generator<at::CPUGeneratorImpl>(5);
    auto noise = [&](const torch::Tensor& like) { return torch::randn(like.sizes(), generator); };
    auto noisy = (*judge)->score_latents(noise((*judge)->real_latents(false)), noise((*judge)->real_latents(true)));
    REQUIRE_MESSAGE(noisy.ok(), noisy.message());
    CHECK(noisy->object <= 0.25);
    CHECK(noisy->relation <= 0.25);

    auto too_few = (*judge)->real_latents(false).slice(0, 0, 10);
    CHECK(!(*judge)->score_latents(too_few, (*judge)->real_latents(true)).ok());  // not one per caption
}

TEST_CASE("an untrained text DiT scores low, the same twice; the cnns are reused") {
    torch::set_num_threads(2);
    testing::TempDir dir;
    auto options = judge_options(dir / "judge");
    REQUIRE(CaptionJudge::make(options).ok());
    auto cached_at = std::filesystem::last_write_time(dir / "judge-class.safetensors");
    auto judge = CaptionJudge::make(options);
    REQUIRE_MESSAGE(judge.ok(), judge.message());
    CHECK(std::filesystem::last_write_time(dir / "judge-class.safetensors") == cached_at);

    auto config = server::default_task_config(canvases(), server::PolicyKind::FedAsync, "dit-tiny-text").value();
    auto weights = server::initial_weights(config).value();
    auto first = (*judge)->score("dit-tiny-text", weights, 3.0);
    REQUIRE_MESSAGE(first.ok(), first.message());
    CHECK(first->relation <= 0.3);
    auto again = (*judge)->score("dit-tiny-text", weights, 3.0);
    REQUIRE(again.ok());
    CHECK(again->object == first->object);
    CHECK(again->relation == first->relation);
    CHECK(again->heldout == first->heldout);
    CHECK(!(*judge)->score("cnn", weights).ok());  // a classifier draws nothing
}

TEST_CASE("experts routed to copies of one text DiT judge as that DiT, by caption too") {
    torch::set_num_threads(2);
    testing::TempDir dir;
    auto judge = CaptionJudge::make(judge_options(dir / "judge")).value();
    auto config = server::default_task_config(canvases(), server::PolicyKind::FedAsync, "dit-nano-text").value();
    auto weights = server::initial_weights(config).value();
    auto alone = judge->score("dit-nano-text", weights, 3.0);
    REQUIRE_MESSAGE(alone.ok(), alone.message());

    auto router_config = server::default_task_config(canvases(), server::PolicyKind::FedAsync, "router").value();
    router_config.num_classes = 2;
    auto router = server::initial_weights(router_config).value();
    std::vector<const common::NamedTensors*> copies{&weights, &weights};
    // Two clusters of the pooled captions, one centre at 0 and one at 1 in every dimension.
    common::ClusterManifest clusters;
    clusters.features = "text";
    clusters.feature_dim = config.text_dim;
    clusters.centres = {std::vector<double>(static_cast<std::size_t>(config.text_dim), 0.0),
                        std::vector<double>(static_cast<std::size_t>(config.text_dim), 1.0)};
    clusters.sizes = {60, 40};
    clusters.inertia = 100.0 * static_cast<double>(config.text_dim);
    for (const auto* rule : {"top1", "top1-caption"}) {
        INFO(rule);
        auto routed = judge->routed_score("dit-nano-text", copies, router, rule, clusters, 3.0);
        REQUIRE_MESSAGE(routed.ok(), routed.message());
        CHECK(routed->object == alone->object);
        CHECK(routed->relation == alone->relation);
        CHECK(routed->heldout == alone->heldout);
    }
    auto on_latents = clusters;
    on_latents.features = "samples";
    CHECK_FALSE(judge->routed_score("dit-nano-text", copies, router, "top1-caption", on_latents).ok());
    CHECK_FALSE(judge->routed_score("dit-nano-text", copies, router, "top1-class", clusters).ok());  // no classes
}

TEST_CASE("a dataset without captioned canvases is no caption judge's data") {
    testing::TempDir dir;
    testing::write_synthetic_dataset(dir / "latents", 1);
    CaptionJudgeOptions options;
    options.data = dir / "latents";
    options.cache = dir / "judge";
    options.quiet = true;
    auto judge = CaptionJudge::make(options);
    REQUIRE(!judge.ok());
    CHECK(judge.message().find("not a captioned canvases dataset") != std::string::npos);
}

TEST_CASE("the fidelity rules read the items off the two least empty quadrants") {
    CaptionTruth truth;
    truth.classes = {3, 4};  // "a dark shoe left of a bag"
    truth.relation = 0;
    truth.attributes = {1, 0};
    auto reading = [](std::int64_t c, std::int64_t a, double empty) { return QuadrantReading{c, a, empty}; };
    FidelityCounts counts;
    counts.add({reading(3, 1, 0.01), reading(4, 0, 0.02), reading(4, 0, 0.9), reading(0, 0, 0.99)}, truth);
    counts.add({reading(4, 0, 0.01), reading(3, 1, 0.02), reading(0, 0, 0.9), reading(0, 0, 0.99)}, truth);
    counts.add({reading(3, 2, 0.01), reading(0, 0, 0.9), reading(4, 0, 0.02), reading(0, 0, 0.99)}, truth);
    counts.add({reading(3, 1, 0.01), reading(2, 0, 0.02), reading(4, 0, 0.5), reading(0, 0, 0.99)}, truth);
    CHECK(counts.canvases == 4);
    CHECK(counts.objects == 3);    // the last drew a dress where the bag should be
    CHECK(counts.relations == 1);  // the second has them the wrong way round, the third in a column
    CHECK(counts.attributes_named == 4);
    CHECK(counts.attributes_right == 2);  // the third's shoe is light
    auto f = fidelity_of(counts, FidelityCounts{});
    CHECK(f.object == doctest::Approx(0.75));
    CHECK(f.relation == doctest::Approx(0.25));
    CHECK(f.heldout == -1);
}
