// The sample-quality judge on synthetic data: it is trained once and cached, its ceilings and
// scores are shares, a score is deterministic, a cache that is broken or made by another
// recipe is replaced, and a dataset of the wrong kind is refused by name.
#include <torch/torch.h>

#include <cmath>

#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "file_io.h"
#include "sample_judge.h"
#include "synthetic_dataset.h"
#include "task_setup.h"
#include "temp_dir.h"
#include "torch/model_state.h"
#include "torch/models/autoencoder.h"
#include "torch_model.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// Synthetic latents with a decoder of random weights, and synthetic real images.
struct JudgeData {
    testing::TempDir dir;
    JudgeOptions options;

    JudgeData() {
        testing::write_synthetic_dataset(dir / "latents", 1);
        testing::write_synthetic_dataset(dir / "pixels", 1, testing::SyntheticKind::Pixels);
        torch::manual_seed(7);
        common::Decoder decoder;
        auto bytes = common::to_safetensors(common::state_of(*decoder)).value();
        REQUIRE(common::write_file_atomic(dir / "latents" / "decoder.safetensors", bytes));
        auto manifest = common::load_dataset_manifest(dir / "latents" / "dataset.json").value();
        manifest.decoder.file = "decoder.safetensors";
        REQUIRE(common::save_dataset_manifest(dir / "latents" / "dataset.json", manifest));
        options.pixels = dir / "pixels";
        options.latents = dir / "latents";
        options.cache = dir / "judge.safetensors";
        options.epochs = 1;
        options.per_class = 3;
        options.sampling_steps = 2;
        options.quiet = true;
    }
};

bool is_share(double x) { return x >= 0 && x <= 1; }

}  // namespace

TEST_CASE("FID beside CAS; experts routed to copies of one model judge as that model") {
    torch::set_num_threads(1);
    JudgeData data;
    auto judge = SampleJudge::make(data.options).value();
    auto config = server::default_task_config(data.options.latents, server::PolicyKind::FedAsync, "dit-tiny").value();
    auto weights = server::initial_weights(config).value();
    auto alone = judge->figures("dit-tiny", weights);
    REQUIRE_MESSAGE(alone.ok(), alone.message());
    CHECK(alone->cas == judge->score("dit-tiny", weights).value());
    CHECK(std::isfinite(alone->fid));
    CHECK(alone->fid > 0);  // random weights draw nothing like the real images

    // A router over two copies of the model: whatever it weighs, the velocity is the model's.
    auto router_shape =
        server::default_task_config(data.options.latents, server::PolicyKind::FedAsync, "router").value();
    router_shape.num_classes = 2;
    auto router = server::initial_weights(router_shape).value();
    std::vector<const common::NamedTensors*> copies{&weights, &weights};
    auto top1 = judge->routed_figures("dit-tiny", copies, router, "top1", {});
    REQUIRE_MESSAGE(top1.ok(), top1.message());
    CHECK(top1->cas == alone->cas);
    CHECK(top1->fid == doctest::Approx(alone->fid).epsilon(1e-6));
    auto all = judge->routed_figures("dit-tiny", copies, router, "all", {}).value();
    CHECK(all.fid == doctest::Approx(alone->fid).epsilon(1e-3));
    // Routed by class too (expert 0 holds classes 0–4, expert 1 the rest): still the model's samples.
    common::ClusterManifest halves;
    halves.class_counts = {{9, 9, 9, 9, 9, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 9, 9, 9, 9, 9}};
    auto by_class = judge->routed_figures("dit-tiny", copies, router, "top1-class", halves);
    REQUIRE_MESSAGE(by_class.ok(), by_class.message());
    CHECK(by_class->cas == alone->cas);
    CHECK_FALSE(judge->routed_figures("dit-tiny", copies, router, "top1-class", {}).ok());  // no counts
    CHECK_FALSE(judge->routed_figures("dit-tiny", copies, router, "top1-caption", halves).ok());  // no captions
    CHECK_FALSE(judge->routed_figures("dit-tiny", copies, router, "mean", {}).ok());
    CHECK_FALSE(judge->routed_figures("dit-tiny", {&weights, &weights, &weights}, router, "top1", {}).ok());
}

TEST_CASE("the judge is trained once, cached, and scores a DiT's samples deterministically") {
    torch::set_num_threads(1);
    JudgeData data;
    auto judge = SampleJudge::make(data.options);
    REQUIRE_MESSAGE(judge.ok(), judge.message());
    REQUIRE(std::filesystem::exists(data.options.cache));
    auto cached_at = std::filesystem::last_write_time(data.options.cache);
    CHECK(is_share((*judge)->ceilings().real_images));
    CHECK(is_share((*judge)->ceilings().reconstructed));

    auto config = server::default_task_config(data.options.latents, server::PolicyKind::FedAsync, "dit-tiny").value();
    auto weights = server::initial_weights(config).value();
    auto first = (*judge)->score("dit-tiny", weights);
    REQUIRE_MESSAGE(first.ok(), first.message());
    CHECK(is_share(*first));
    CHECK(*first * 30 == doctest::Approx(std::round(*first * 30)));  // a share of 10 classes × 3 samples
    CHECK((*judge)->score("dit-tiny", weights).value() == *first);
    auto by_guidance = score_by_guidance(**judge, "dit-tiny", weights, {1.0, 3.0});
    REQUIRE_MESSAGE(by_guidance.ok(), by_guidance.message());
    REQUIRE(by_guidance->size() == 2);
    CHECK(is_share(by_guidance->front()));
    CHECK(by_guidance->back() == *first);  // 3 is score()'s default
    CHECK(by_guidance->front() == (*judge)->score("dit-tiny", weights, 1.0).value());

    auto again = SampleJudge::make(data.options);  // reused, not trained again
    REQUIRE(again.ok());
    CHECK(std::filesystem::last_write_time(data.options.cache) == cached_at);
    CHECK((*again)->ceilings().real_images == (*judge)->ceilings().real_images);

    CHECK(!(*judge)->score("cnn", weights).ok());  // a classifier draws no samples
}

TEST_CASE("a judge cached by another recipe is trained again") {
    torch::set_num_threads(1);
    JudgeData data;
    REQUIRE(SampleJudge::make(data.options).ok());
    auto first = std::filesystem::last_write_time(data.options.cache);
    std::filesystem::last_write_time(data.options.cache, first - std::chrono::hours(1));
    data.options.epochs = 2;
    REQUIRE(SampleJudge::make(data.options).ok());
    CHECK(std::filesystem::last_write_time(data.options.cache) > first - std::chrono::hours(1));
}

TEST_CASE("a broken judge cache is replaced; a latent dataset is no judge data") {
    torch::set_num_threads(1);
    JudgeData data;
    REQUIRE(common::write_file_atomic(data.options.cache, common::Bytes{1, 2, 3}));
    auto judge = SampleJudge::make(data.options);
    REQUIRE_MESSAGE(judge.ok(), judge.message());
    CHECK(std::filesystem::file_size(data.options.cache) > 3);

    data.options.pixels = data.options.latents;
    auto wrong = SampleJudge::make(data.options);
    REQUIRE(!wrong.ok());
    CHECK(wrong.message().find("not a pixel dataset") != std::string::npos);
}
