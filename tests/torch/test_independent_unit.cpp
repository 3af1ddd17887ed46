// A volunteer written from the docs alone reproduces a unit's delta: tests/reference/
// cnn_unit.py and dit_unit.py implement the specified randomness, the cnn, the class and text
// DiTs, the experts' router and the inner loop in Python (Debian's python3-torch for tensor arithmetic only), train
// the same units as the reference trainer, and the deltas must agree to floating-point rounding.
#include <torch/torch.h>

#include "doctest_after_torch.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <utility>

#include "checkpoint.h"
#include "child_process.h"
#include "file_io.h"
#include "safetensors.h"
#include "temp_dir.h"
#include "torch/shard_data.h"
#include "torch/tensor_convert.h"
#include "torch/trainer.h"
#include "torch/workload.h"

using namespace tessera;

namespace {

constexpr std::int64_t kRows = 96;
constexpr std::int64_t kDitRows = 40;
constexpr std::int64_t kCaptionWidth = 16;
constexpr std::int64_t kLongestCaption = 11;  // longer than the null caption's 8 tokens

// Random images with random labels, as a shard file holds them (pixels U8, labels I64).
common::Bytes random_shard(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(kRows * 28 * 28));
    for (auto& p : pixels) p = static_cast<std::uint8_t>(rng() % 256);
    std::vector<std::int64_t> labels(kRows);
    for (auto& l : labels) l = static_cast<std::int64_t>(rng() % 10);
    std::vector<common::TensorView> views{
        {"labels",
         common::DType::I64,
         {kRows},
         {reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size() * 8}},
        {"pixels", common::DType::U8, {kRows, 1, 28, 28}, {pixels.data(), pixels.size()}}};
    return common::write_safetensors(views).value();
}

// Random 4x8x8 latents with random labels and, with `text`, captions of 1 ... kLongestCaption
// tokens in the packed layout (text_tokens + text_len).
common::Bytes random_dit_shard(std::uint32_t seed, bool text) {
    torch::manual_seed(seed);
    common::TorchTensorMap tensors{{"latents", torch::randn({kDitRows, 4, 8, 8})},
                                   {"labels", torch::randint(10, {kDitRows}, torch::kInt64)}};
    if (text) {
        auto lengths = torch::randint(1, kLongestCaption + 1, {kDitRows}, torch::kInt64);
        lengths[0] = kLongestCaption;
        tensors["text_len"] = lengths;
        tensors["text_tokens"] = torch::randn({lengths.sum().item<std::int64_t>(), kCaptionWidth});
    }
    return common::to_safetensors(tensors).value();
}

// The elements of an attention layer's key bias: `qkv.bias`'s middle third, `cross_kv.bias`'s
// first half ([begin, end); {0, 0} for other tensors). Softmax is invariant to a shift shared by
// every key, so their gradient is zero in exact arithmetic: what the two implementations compute
// for it is rounding, which AdamW (dividing by its own running size) turns into small steps that
// follow the rounding, not the data.
std::pair<std::size_t, std::size_t> key_bias_elements(const common::NamedTensor& t) {
    auto n = t.values.size();
    if (t.name.ends_with(".qkv.bias")) return {n / 3, 2 * n / 3};
    if (t.name.ends_with(".cross_kv.bias")) return {0, n / 2};
    return {0, 0};
}

// ||a - b|| / ||a|| over every tensor, optionally leaving the key biases out of both norms.
double relative_distance(const common::NamedTensors& a, const common::NamedTensors& b,
                         bool without_key_biases = false) {
    double difference = 0, norm = 0;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].name == b[i].name);
        REQUIRE(a[i].values.size() == b[i].values.size());
        auto [skip_begin, skip_end] =
            without_key_biases ? key_bias_elements(a[i]) : std::pair<std::size_t, std::size_t>{};
        for (std::size_t j = 0; j < a[i].values.size(); ++j) {
            if (j >= skip_begin && j < skip_end) continue;
            double d = static_cast<double>(a[i].values[j]) - b[i].values[j];
            difference += d * d;
            norm += static_cast<double>(a[i].values[j]) * a[i].values[j];
        }
    }
    return std::sqrt(difference / norm);
}

struct IndependentRun {
    common::NamedTensors reference;    // the reference trainer's delta
    common::NamedTensors independent;  // the Python script's
    common::TorchTensorMap theta0;
    common::ShardData data;
};

// Trains a DiT unit with the reference trainer and with tests/reference/dit_unit.py. theta0 is
// the preset's initialisation perturbed, so that its zero-initialised layers (the output, the
// cross-attention's projection) carry gradients from the first step.
IndependentRun run_dit_unit(const std::string& preset, const common::Hyperparameters& hyper,
                            const std::string& unit_json) {
    const char* python = std::getenv("TESSERA_PYTHON_TORCH");
    REQUIRE_MESSAGE(python != nullptr, "TESSERA_PYTHON_TORCH: a python3 with Debian's python3-torch");
    const char* script = std::getenv("TESSERA_DIT_UNIT_PY");
    REQUIRE(script != nullptr);
    testing::TempDir dir;

    bool text = preset.ends_with("-text");
    auto shard_bytes = random_dit_shard(5, text);
    IndependentRun run;
    run.data = common::load_shard(shard_bytes).value();
    auto workload = common::make_workload(preset, common::data_shape_of(run.data, 10), 11).value();
    torch::manual_seed(13);
    for (const auto& p : workload->module()->named_parameters())
        run.theta0.emplace(p.key(), p.value().detach() + torch::randn_like(p.value()) * 0.05);

    auto outcome = common::train(preset, run.theta0, run.data, common::train_config_for(hyper)).value();
    run.reference = common::to_named_f32(outcome.delta);

    REQUIRE(common::write_file_atomic(dir.path() / "shard.safetensors", shard_bytes));
    auto checkpoint = common::write_checkpoint(common::to_named_f32(run.theta0), {"t", preset, 0}).value();
    REQUIRE(common::write_file_atomic(dir.path() / "theta0.safetensors", checkpoint));
    std::ofstream(dir.path() / "unit.json") << unit_json;

    testing::ChildProcess child({python, script, dir.path().string()});
    REQUIRE(child.wait() == 0);
    auto bytes = common::read_file(dir.path() / "delta_python.safetensors", 1 << 24).value();
    run.independent = common::read_checkpoint(bytes).value();
    return run;
}

// A `preset` unit on the class shard by both implementations — two epochs of four batches of 10
// over 40 rows, warm-up, weight decay and clipping — within 10⁻⁴ of each other (key biases
// aside), and far from another seed's unit: the agreement is not a coincidence of the data.
void check_class_unit(const std::string& preset) {
    common::Hyperparameters hyper{.local_steps = 8,
                                  .batch_size = 10,
                                  .lr = 2e-3,
                                  .warmup_steps = 3,
                                  .weight_decay = 0.01,
                                  .grad_clip = 1.0,
                                  .seed = 1234567,
                                  .caption_drop = {}};
    auto run = run_dit_unit(preset, hyper,
                            R"({"model": ")" + preset +
                                R"(", "local_steps": 8, "batch_size": 10, "lr": 0.002, )"
                                R"("warmup_steps": 3, "weight_decay": 0.01, "grad_clip": 1.0, "seed": 1234567})");
    auto distance = relative_distance(run.reference, run.independent, true);
    MESSAGE(preset << ": relative L2 distance between the two deltas: " << distance << " without the key biases, "
                   << relative_distance(run.reference, run.independent) << " with them");
    CHECK(distance < 1e-4);
    hyper.seed = 7654321;
    auto other = common::to_named_f32(
        common::train(preset, run.theta0, run.data, common::train_config_for(hyper)).value().delta);
    CHECK(relative_distance(other, run.independent, true) > 0.1);
}

}  // namespace

TEST_CASE("a cnn unit trained by a second implementation written from the docs matches the reference trainer's") {
    const char* python = std::getenv("TESSERA_PYTHON_TORCH");
    REQUIRE_MESSAGE(python != nullptr, "TESSERA_PYTHON_TORCH: a python3 with Debian's python3-torch");
    const char* script = std::getenv("TESSERA_CNN_UNIT_PY");
    REQUIRE(script != nullptr);
    testing::TempDir dir;

    auto shard_bytes = random_shard(3);
    auto data = common::load_shard(shard_bytes).value();
    auto workload = common::make_workload("cnn", common::data_shape_of(data, 10), 11).value();
    common::TorchTensorMap theta0;
    for (const auto& p : workload->module()->named_parameters()) theta0.emplace(p.key(), p.value().detach().clone());

    // Two epochs of six batches (a second permutation), warm-up, weight decay and clipping.
    common::Hyperparameters hyper{.local_steps = 12,
                                  .batch_size = 16,
                                  .lr = 2e-3,
                                  .warmup_steps = 3,
                                  .weight_decay = 0.01,
                                  .grad_clip = 1.0,
                                  .seed = 1234567,
                                  .caption_drop = {}};
    auto outcome = common::train("cnn", theta0, data, common::train_config_for(hyper)).value();
    auto reference = common::to_named_f32(outcome.delta);

    REQUIRE(common::write_file_atomic(dir.path() / "shard.safetensors", shard_bytes));
    auto checkpoint = common::write_checkpoint(common::to_named_f32(theta0), {"t", "cnn", 0}).value();
    REQUIRE(common::write_file_atomic(dir.path() / "theta0.safetensors", checkpoint));
    std::ofstream(dir.path() / "unit.json")
        << R"({"local_steps": 12, "batch_size": 16, "lr": 0.002, "warmup_steps": 3, "weight_decay": 0.01, )"
        << R"("grad_clip": 1.0, "seed": 1234567})";

    testing::ChildProcess child({python, script, dir.path().string()});
    REQUIRE(child.wait() == 0);
    auto bytes = common::read_file(dir.path() / "delta_python.safetensors", 1 << 24).value();
    auto independent = common::read_checkpoint(bytes).value();
    // Sorted by name in both; the same arithmetic in another order rounds differently.
    auto distance = relative_distance(reference, independent);
    MESSAGE("relative L2 distance between the two deltas: " << distance);
    CHECK(distance < 1e-4);
    // Another seed is another unit: the agreement above is not a coincidence of the data.
    hyper.seed = 7654321;
    auto other =
        common::to_named_f32(common::train("cnn", theta0, data, common::train_config_for(hyper)).value().delta);
    CHECK(relative_distance(other, independent) > 0.1);
}

TEST_CASE("a class DiT unit trained by a second implementation written from the docs matches the reference trainer's") {
    check_class_unit("dit-tiny");
}

TEST_CASE("a router unit trained by a second implementation written from the docs matches the reference trainer's") {
    // The router of an expert group: x_t drawn as a DiT unit draws it, cross-entropy on the label.
    check_class_unit("router");
}

TEST_CASE("a text DiT unit trained by a second implementation written from the docs matches the reference trainer's") {
    // Packed captions of 1 ... 11 tokens (padding and the null caption's 8 both masked), and
    // a caption drop of 0.3 so that several samples of every batch train the null caption.
    common::Hyperparameters hyper{.local_steps = 8,
                                  .batch_size = 10,
                                  .lr = 2e-3,
                                  .warmup_steps = 3,
                                  .weight_decay = 0.01,
                                  .grad_clip = 1.0,
                                  .seed = 1234567,
                                  .caption_drop = 0.3};
    auto run = run_dit_unit("dit-tiny-text", hyper,
                            R"({"model": "dit-tiny-text", "local_steps": 8, "batch_size": 10, "lr": 0.002, )"
                            R"("warmup_steps": 3, "weight_decay": 0.01, "grad_clip": 1.0, "seed": 1234567, )"
                            R"("caption_drop": 0.3})");
    auto distance = relative_distance(run.reference, run.independent, true);
    MESSAGE("dit-tiny-text: relative L2 distance between the two deltas: "
            << distance << " without the key biases, " << relative_distance(run.reference, run.independent)
            << " with them");
    CHECK(distance < 1e-4);
    // Captions were dropped: the null caption learned (and the distance above says the reference
    // trainer's learned alike).
    auto null_caption = std::find_if(run.independent.begin(), run.independent.end(),
                                     [](const auto& t) { return t.name == "null_caption"; });
    REQUIRE(null_caption != run.independent.end());
    double moved = 0;
    for (float v : null_caption->values) moved = std::max(moved, static_cast<double>(std::abs(v)));
    CHECK(moved > 1e-4);
    hyper.seed = 7654321;
    auto other = common::to_named_f32(
        common::train("dit-tiny-text", run.theta0, run.data, common::train_config_for(hyper)).value().delta);
    CHECK(relative_distance(other, run.independent, true) > 0.1);
}

TEST_CASE("patch-masked DiT units (r = 0.75) trained by the second implementation match the reference trainer's") {
    // 4 of each sample's 16 tokens kept after the one-block mixer; the class and the text DiT.
    for (const std::string preset : {"dit-tiny", "dit-tiny-text"}) {
        CAPTURE(preset);
        common::Hyperparameters hyper{.local_steps = 8,
                                      .batch_size = 10,
                                      .lr = 2e-3,
                                      .warmup_steps = 3,
                                      .weight_decay = 0.01,
                                      .grad_clip = 1.0,
                                      .seed = 1234567,
                                      .caption_drop = {},
                                      .patch_mask = 0.75};
        auto run = run_dit_unit(preset, hyper,
                                R"({"model": ")" + preset +
                                    R"(", "local_steps": 8, "batch_size": 10, "lr": 0.002, "warmup_steps": 3, )"
                                    R"("weight_decay": 0.01, "grad_clip": 1.0, "seed": 1234567, "patch_mask": 0.75})");
        auto distance = relative_distance(run.reference, run.independent, true);
        MESSAGE(preset << " masked: relative L2 distance between the two deltas: " << distance
                       << " without the key biases");
        CHECK(distance < 1e-4);
        // The mask mattered: the unmasked unit from the same seed is another delta.
        hyper.patch_mask = 0;
        auto unmasked = common::to_named_f32(
            common::train(preset, run.theta0, run.data, common::train_config_for(hyper)).value().delta);
        CHECK(relative_distance(unmasked, run.independent, true) > 0.1);
    }
}
