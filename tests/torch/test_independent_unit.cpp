// A volunteer written from the docs alone reproduces a unit's delta: tests/reference/
// cnn_unit.py implements the specified randomness, the cnn and the inner loop in Python
// (Debian's python3-torch for tensor arithmetic only), trains the same cnn unit as the
// reference trainer, and the two deltas must agree to floating-point rounding.
#include <torch/torch.h>

#include "doctest_after_torch.h"

#include <cstdlib>
#include <fstream>
#include <random>

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

// Random images with random labels, as a shard file holds them (pixels U8, labels I64).
common::Bytes random_shard(std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::uint8_t> pixels(static_cast<std::size_t>(kRows * 28 * 28));
    for (auto& p : pixels) p = static_cast<std::uint8_t>(rng() % 256);
    std::vector<std::int64_t> labels(kRows);
    for (auto& l : labels) l = static_cast<std::int64_t>(rng() % 10);
    std::vector<common::TensorView> views{
        {"labels", common::DType::I64, {kRows}, {reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size() * 8}},
        {"pixels", common::DType::U8, {kRows, 1, 28, 28}, {pixels.data(), pixels.size()}}};
    return common::write_safetensors(views).value();
}

double relative_distance(const common::NamedTensors& a, const common::NamedTensors& b) {
    double difference = 0, norm = 0;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        REQUIRE(a[i].name == b[i].name);
        REQUIRE(a[i].values.size() == b[i].values.size());
        for (std::size_t j = 0; j < a[i].values.size(); ++j) {
            double d = static_cast<double>(a[i].values[j]) - b[i].values[j];
            difference += d * d;
            norm += static_cast<double>(a[i].values[j]) * a[i].values[j];
        }
    }
    return std::sqrt(difference / norm);
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
                                  .seed = 1234567};
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
    auto other = common::to_named_f32(common::train("cnn", theta0, data, common::train_config_for(hyper)).value().delta);
    CHECK(relative_distance(other, independent) > 0.1);
}
