// The contribution checks' per-sample losses (common/torch/check_losses.h): a few rows' losses
// equal the whole evaluation's at those rows, across batches, for every kind of model, so a
// server can check a loss-check unit's report by recomputing a sample of it; a loss-check
// unit's report of a zero delta; a delta that does not fit the model.
#include <torch/torch.h>

#include "doctest_after_torch.h"
#include "torch/check_losses.h"
#include "torch/model_state.h"
#include "torch/trainer.h"
#include "torch/workload.h"

using namespace tessera::common;

namespace {

constexpr std::int64_t kRows = 600;  // three evaluation batches of 256

// `kRows` random samples for `preset`: 28×28 pixels for the cnn, 4×8×8 latents otherwise, with
// captions of 1 to 3 tokens for a text DiT.
ShardData data_for(const std::string& preset) {
    torch::manual_seed(7);
    ShardData data;
    data.pixels = preset == "cnn";
    data.inputs = data.pixels ? torch::randn({kRows, 1, 28, 28}) : torch::randn({kRows, 4, 8, 8});
    data.labels = torch::arange(kRows, torch::kInt64) % 10;
    if (preset.find("-text") != std::string::npos) {
        data.text_tokens = torch::randn({3 * kRows, 16});
        data.text_start = torch::arange(kRows, torch::kInt64) * 3;
        data.text_len = 1 + torch::arange(kRows, torch::kInt64) % 3;
    }
    return data;
}

}  // namespace

TEST_CASE("a few rows' check losses are the whole evaluation's at those rows") {
    for (const std::string preset : {"dit-tiny", "cnn", "dit-tiny-text", "router"}) {
        CAPTURE(preset);
        auto data = data_for(preset);
        auto workload = make_workload(preset, data_shape_of(data, 10), 3);
        REQUIRE(workload);
        auto weights = state_of(*(*workload)->module());
        auto whole = check_losses(**workload, weights, data, kRows);
        REQUIRE(whole);
        REQUIRE(whole->size() == static_cast<std::size_t>(kRows));
        const std::vector<std::int64_t> rows{0, 5, 255, 256, 300, 511, 512, 599};
        auto some = check_losses(**workload, weights, data, kRows, rows);
        REQUIRE(some);
        REQUIRE(some->size() == rows.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            CAPTURE(rows[i]);
            CHECK((*some)[i] == doctest::Approx((*whole)[rows[i]]).epsilon(1e-5));
        }
        // Asked again, the whole evaluation is unchanged: the rows were for that call only.
        auto again = check_losses(**workload, weights, data, kRows);
        REQUIRE(again);
        CHECK(*again == *whole);
        CHECK(check_losses(**workload, weights, data, 100, {50, 150}).message() == "rows outside the evaluated data");
    }
}

TEST_CASE("a loss-check report of a zero delta has the same losses before and after") {
    auto data = data_for("dit-tiny");
    auto held_out = data.slice(0, 40);
    auto workload = make_workload("dit-tiny", data_shape_of(data, 10), 3);
    REQUIRE(workload);
    auto base = state_of(*(*workload)->module());
    TorchTensorMap zero;
    for (const auto& [name, value] : base) zero.emplace(name, torch::zeros_like(value));
    auto after = with_delta(base, zero);
    REQUIRE(after);
    Hyperparameters hyper;
    hyper.batch_size = 8;
    hyper.local_steps = 4;
    hyper.seed = 11;
    auto report = evaluate_loss_check(**workload, base, *after, data, held_out, hyper, 64);
    REQUIRE(report);
    CHECK(report->held_out_before.size() == 40);  // the held-out shard has 40 rows
    CHECK(report->own_before.size() == 32);       // the unit's first epoch visits 4 × 8 rows
    CHECK(report->held_out_after == report->held_out_before);
    CHECK(report->own_after == report->own_before);
    // The own rows are the ones the unit's first epoch drew.
    auto own = own_rows(data, hyper, 64);
    auto direct = check_losses(**workload, base, own, own.size());
    REQUIRE(direct);
    CHECK(*direct == report->own_before);
}

TEST_CASE("a delta that does not fit the model is named") {
    auto data = data_for("dit-tiny");
    auto workload = make_workload("dit-tiny", data_shape_of(data, 10), 3);
    REQUIRE(workload);
    auto base = state_of(*(*workload)->module());
    auto missing = base;
    auto first = missing.begin()->first;
    missing.erase(missing.begin());
    missing.emplace("not_a_parameter", torch::zeros({1}));
    CHECK(with_delta(base, missing).message() == "the delta has no tensor \"" + first + "\"");
    auto reshaped = base;
    reshaped.begin()->second = torch::zeros({3, 3, 3});
    CHECK(with_delta(base, reshaped).message().find("has another shape") != std::string::npos);
    missing.erase("not_a_parameter");
    CHECK(with_delta(base, missing).message().find("tensors; the model") != std::string::npos);
}
