// The local trainer on real Fashion-MNIST data: the diffusion loss falls, the classifier
// learns, runs are reproducible, and bad inputs give clear errors.
#include <ATen/autocast_mode.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cmath>

#include "dataset_manifest.h"
#include "doctest_after_torch.h"
#include "small_dataset.h"
#include "trainer_fixtures.h"
#include "torch/adamw.h"
#include "torch/model_state.h"
#include "torch/sampling.h"
#include "torch/trainer.h"
#include "file_io.h"

using namespace tessera::common;
using tessera::testing::apply_delta;
using tessera::testing::first_shard_and_weights;

namespace {

ShardData load_train_shards(const std::filesystem::path& dir, const DatasetManifest& manifest) {
    std::vector<ShardData> shards;
    for (const auto& f : manifest.train) shards.push_back(load_shard_file(dir / f.file).value());
    return concat_shards(shards).value();
}

// bf16 autocast on the CPU (LibTorch 2.4 renamed the switches), as the trainer's on CUDA.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
void cpu_autocast(bool enabled) {
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
    at::autocast::set_autocast_enabled(at::kCPU, enabled);
}
#else
void cpu_autocast(bool enabled) {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(enabled);
}
#endif

}  // namespace

TEST_CASE("a few hundred dit-tiny steps clearly lower the validation loss") {
    const auto& dir = tessera::testing::small_latent_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    auto train_data = load_train_shards(dir, manifest);
    auto validation = load_shard_file(dir / manifest.validation.file).value();

    auto workload = make_workload("dit-tiny", data_shape_of(train_data, 10), 0).value();
    auto theta0 = state_of(*workload->module());
    double before = workload->evaluate(validation, torch::kCPU, 512).loss;

    TrainConfig config;
    config.steps = 300;
    config.batch_size = 64;
    config.lr = 1e-3;
    config.warmup_steps = 20;
    std::int64_t reported = 0;
    auto outcome = train("dit-tiny", theta0, train_data, config, [&](const StepProgress& p) { reported = p.step; });
    REQUIRE(outcome.ok());
    CHECK(reported == 300);
    CHECK(outcome->stats.samples == 300 * 64);
    CHECK(outcome->stats.loss_end < outcome->stats.loss_start);

    REQUIRE(load_state(*workload->module(), apply_delta(theta0, outcome->delta)).ok());
    double after = workload->evaluate(validation, torch::kCPU, 512).loss;
    MESSAGE("dit-tiny validation loss " << before << " -> " << after);
    CHECK(after < 0.8 * before);

    // The trained model renders images through the dataset's decoder: a PNG, not blank.
    Decoder decoder;
    auto decoder_bytes = read_file(dir / manifest.decoder.file, 1 << 24).value();
    REQUIRE(load_state(*decoder, to_torch_map(parse_safetensors(decoder_bytes).value()).value()).ok());
    GridOptions grid;
    grid.per_class = 2;
    grid.latent_scale = manifest.scale_factor;
    grid.sampling.steps = 10;
    auto png = sample_png_grid(*workload, decoder, grid);
    REQUIRE(png.ok());
    CHECK(std::string(png->begin() + 1, png->begin() + 4) == "PNG");
    torch::NoGradGuard no_grad;
    auto latents = euler_sample(*dit_of(*workload), DitCondition{torch::arange(10), {}, {}}, grid.sampling);
    auto images = decoder->forward(latents / manifest.scale_factor);
    CHECK(images.std().item<double>() > 0.1);
}

TEST_CASE("a stratified evaluation gives each sample one t of the grid: the full grid's mean, sample by sample") {
    const auto& dir = tessera::testing::small_latent_dataset();
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    auto validation = load_shard_file(dir / manifest.validation.file).value();
    auto workload = make_workload("dit-tiny", data_shape_of(validation, 10), 0).value();

    auto full = workload->evaluate(validation, torch::kCPU, 512);
    workload->set_eval_grid(EvalGrid::Stratified);
    auto first = workload->evaluate(validation, torch::kCPU, 512);
    auto again = workload->evaluate(validation, torch::kCPU, 512);
    REQUIRE(first.samples == 512);
    // Deterministic, so two weight sets are compared on the same draws.
    CHECK(torch::equal(first.sample_losses, again.sample_losses));
    // Another estimate of the same mean: each sample at one of the grid's eight t, in turn.
    CHECK_FALSE(torch::allclose(first.sample_losses, full.sample_losses));
    MESSAGE("dit-tiny validation loss, full grid " << full.loss << ", stratified " << first.loss);
    CHECK(std::abs(first.loss - full.loss) < 0.1 * full.loss);
    workload->set_eval_grid(EvalGrid::Full);
    CHECK(torch::equal(workload->evaluate(validation, torch::kCPU, 512).sample_losses, full.sample_losses));
}

TEST_CASE("training is deterministic on the CPU for a fixed seed") {
    auto [data, theta0] = first_shard_and_weights();
    TrainConfig config;
    config.steps = 5;
    config.batch_size = 16;
    config.seed = 42;
    auto a = train("dit-tiny", theta0, data, config).value();
    auto b = train("dit-tiny", theta0, data, config).value();
    config.seed = 43;
    auto c = train("dit-tiny", theta0, data, config).value();
    for (const auto& [name, delta] : a.delta) CHECK(torch::equal(delta, b.delta.at(name)));
    CHECK_FALSE(torch::equal(a.delta.at("blocks.0.qkv.weight"), c.delta.at("blocks.0.qkv.weight")));
}

TEST_CASE("gradient accumulation over micro-batches matches the full batch") {
    auto [data, theta0] = first_shard_and_weights();
    TrainConfig config;
    config.steps = 1;
    config.batch_size = 32;
    config.lr = 1e-3;
    auto whole = train("dit-tiny", theta0, data, config).value();
    config.micro_batch = 8;
    auto pieces = train("dit-tiny", theta0, data, config).value();
    // Same data and the same random draws per step: only float summation order differs.
    for (const auto& [name, delta] : whole.delta) CHECK(torch::allclose(delta, pieces.delta.at(name), 1e-4, 1e-6));
}

// The trainer keeps autocast's bf16 copies of the weights over a step's micro-batches, enabling
// autocast for each forward only: the backward passes through a kept copy again and again.
// The layer is called as the DiT calls its layers, torch::linear on the weight itself
// (Linear::forward passes a transposed view, whose casts autocast never keeps).
TEST_CASE("bf16 weight copies kept over micro-batches give the gradients of fresh ones") {
    torch::manual_seed(3);
    torch::nn::Linear layer(16, 8);
    auto forward = [&](const torch::Tensor& x) { return torch::linear(x, layer->weight, layer->bias); };
    auto inputs = torch::randn({12, 16});
    auto gradients = [&](bool keep_copies) {
        layer->zero_grad();
        for (std::int64_t part = 0; part < 3; ++part) {
            cpu_autocast(true);
            auto out = forward(inputs.slice(0, 4 * part, 4 * part + 4));
            cpu_autocast(false);
            REQUIRE((out.scalar_type() == torch::kBFloat16));
            out.to(torch::kFloat32).square().sum().backward();
            if (!keep_copies) at::autocast::clear_cache();
        }
        at::autocast::clear_cache();
        return std::vector<torch::Tensor>{layer->weight.grad().clone(), layer->bias.grad().clone()};
    };
    auto fresh = gradients(false);
    auto kept = gradients(true);
    CHECK(torch::equal(fresh[0], kept[0]));
    CHECK(torch::equal(fresh[1], kept[1]));

    // The copies are kept indeed: a weight changed in place is not seen until they are dropped,
    // which is why the trainer drops them before the optimizer's step.
    cpu_autocast(true);
    auto before = forward(inputs);
    {
        torch::NoGradGuard no_grad;
        layer->weight.mul_(2);
    }
    auto cached = forward(inputs);
    at::autocast::clear_cache();
    auto recast = forward(inputs);
    cpu_autocast(false);
    at::autocast::clear_cache();
    CHECK(torch::equal(before, cached));
    CHECK_FALSE(torch::equal(before, recast));
}

TEST_CASE("the cnn trained centrally for 2 epochs reaches 0.88 test accuracy") {
    tessera::testing::TempDir dir;
    tessera::data::PrepareOptions options;
    options.out = dir.path();
    options.pixels = true;
    REQUIRE(tessera::data::prepare_fashion_mnist(options).ok());
    auto manifest = load_dataset_manifest(dir / "dataset.json").value();
    CHECK(manifest.kind == "pixels");
    auto train_data = load_train_shards(dir.path(), manifest);
    auto test_data = load_shard_file(dir / manifest.validation.file).value();
    CHECK(train_data.size() == 60000);
    CHECK(test_data.size() == 10000);

    auto workload = make_workload("cnn", data_shape_of(train_data, 10), 0).value();
    auto theta0 = state_of(*workload->module());
    TrainConfig config;
    config.batch_size = 64;
    config.steps = 2 * 60000 / 64;
    config.lr = 2e-3;
    config.warmup_steps = 50;
    config.grad_clip = 0;
    auto outcome = train("cnn", theta0, train_data, config);
    REQUIRE(outcome.ok());
    REQUIRE(load_state(*workload->module(), apply_delta(theta0, outcome->delta)).ok());
    auto result = workload->evaluate(test_data, torch::kCPU, 10000);
    MESSAGE("cnn test accuracy after 2 epochs: " << result.accuracy);
    CHECK(result.samples == 10000);
    CHECK(result.accuracy >= 0.88);
}

TEST_CASE("mismatched weights, data or devices give clear errors") {
    auto [data, theta0] = first_shard_and_weights();
    TrainConfig config;
    config.steps = 1;

    auto wrong_preset = train("dit-s", theta0, data, config);
    CHECK(wrong_preset.message().find("tensors but the weights have") != std::string::npos);
    CHECK(train("no-such-model", theta0, data, config).message().find("unknown model preset") != std::string::npos);
    CHECK_FALSE(train("cnn", theta0, data, config).ok());
    auto relabelled = data;
    relabelled.labels = data.labels.clone();
    relabelled.labels[0] = 10;
    CHECK(train("dit-tiny", theta0, relabelled, config).message().find("label 10 is not below") != std::string::npos);
    CHECK(train("dit-tiny", theta0, ShardData{}, config).message().find("no training samples") != std::string::npos);
    config.device = "cuda:7";
    CHECK_FALSE(train("dit-tiny", theta0, data, config).ok());
    config.device = "tpu";
    CHECK_FALSE(train("dit-tiny", theta0, data, config).ok());
}

TEST_CASE("MultiTensorAdamW takes torch::optim::AdamW's steps, bit for bit on the CPU") {
    torch::manual_seed(11);
    std::vector<torch::Tensor> ours{torch::randn({7, 5}), torch::randn({5}), torch::randn({})};
    std::vector<torch::Tensor> theirs;
    for (auto& p : ours) {
        p.set_requires_grad(true);
        theirs.push_back(p.detach().clone().set_requires_grad(true));
    }
    tessera::common::MultiTensorAdamW optimizer(ours, 0.01);
    torch::optim::AdamW reference(theirs, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    for (int step = 0; step < 6; ++step) {
        double lr = 1e-2 * (step + 1) / 6.0;  // a warm-up, as the trainer does
        for (auto& group : reference.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
        optimizer.zero_grad();
        reference.zero_grad();
        for (std::size_t i = 0; i < ours.size(); ++i) {
            if (step == 2 && i == 1) {  // a parameter without a gradient this step
                theirs[i].mutable_grad() = torch::Tensor();
                continue;
            }
            auto grad = torch::randn_like(ours[i]);
            ours[i].mutable_grad() = grad.clone();
            theirs[i].mutable_grad() = grad.clone();
        }
        optimizer.step(lr);
        reference.step();
        for (std::size_t i = 0; i < ours.size(); ++i) CHECK(torch::equal(ours[i], theirs[i]));
    }
}

// LibTorch 2.x's fused kernel (one launch per step); the step counts it keeps on the device
// must also come back out with the moments, so that a kept optimizer carries on.
TEST_CASE("MultiTensorAdamW on a CUDA device follows torch::optim::AdamW to float rounding" *
          doctest::skip(!torch::cuda::is_available())) {
    torch::manual_seed(12);
    std::vector<torch::Tensor> ours, theirs;
    for (auto shape : {std::vector<std::int64_t>{64, 33}, {33}, {}}) {
        auto p = torch::randn(shape);
        theirs.push_back(p.clone().set_requires_grad(true));
        ours.push_back(p.to(torch::kCUDA).set_requires_grad(true));
    }
    tessera::common::MultiTensorAdamW optimizer(ours, 0.01);
    torch::optim::AdamW reference(theirs, torch::optim::AdamWOptions(1e-2).weight_decay(0.01));
    for (int step = 0; step < 6; ++step) {
        double lr = 1e-2 * (step + 1) / 6.0;
        for (auto& group : reference.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
        optimizer.zero_grad();
        reference.zero_grad();
        for (std::size_t i = 0; i < ours.size(); ++i) {
            if (step == 2 && i == 1) {
                theirs[i].mutable_grad() = torch::Tensor();
                continue;
            }
            auto grad = torch::randn_like(theirs[i]);
            ours[i].mutable_grad() = grad.to(torch::kCUDA);
            theirs[i].mutable_grad() = grad.clone();
        }
        optimizer.step(lr);
        reference.step();
        for (std::size_t i = 0; i < ours.size(); ++i)
            CHECK(torch::allclose(ours[i].cpu(), theirs[i].detach(), 1e-5, 1e-6));
    }
    auto moments = optimizer.moments();
    CHECK(moments[0].steps == 6);
    CHECK(moments[1].steps == 5);
    CHECK(moments[2].steps == 6);
}
