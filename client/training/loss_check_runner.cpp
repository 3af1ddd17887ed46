// A loss-check unit's evaluation (loss_check_runner.h).
#include "loss_check_runner.h"

#include <torch/torch.h>

#include <chrono>

#include "delta_codec.h"
#include "file_io.h"
#include "loss_report.h"
#include "safetensors.h"
#include "torch/check_losses.h"
#include "torch/trainer.h"
#include "training/unit_inputs.h"

namespace tessera::client {
namespace {

// The checked delta, decoded whatever its codec, as tensors to add to the base.
common::Result<common::TorchTensorMap> read_delta(const std::filesystem::path& file, std::uint64_t max_values) {
    auto bytes = common::read_file(file, common::kMaxModelBytes);
    if (!bytes) return bytes.error();
    auto decoded = common::decode_delta(*bytes, {max_values});
    if (!decoded) return common::with_context("the checked result", decoded.error());
    return common::from_named_f32(decoded->tensors);
}

double mean_of(const std::vector<double>& values) {
    double total = 0;
    for (double v : values) total += v;
    return values.empty() ? 0.0 : total / static_cast<double>(values.size());
}

}  // namespace

common::Result<CheckOutput> run_loss_check(const common::WorkUnit& unit, const CheckInputs& inputs, int threads) {
    if (!unit.check) return common::make_error("not a loss-check unit");
    if (threads > 0) torch::set_num_threads(threads);
    const auto started = std::chrono::steady_clock::now();
    try {
        auto base = read_base_model(inputs.model);
        if (!base) return base.error();
        std::uint64_t values = 0;
        for (const auto& [name, tensor] : *base) values += static_cast<std::uint64_t>(tensor.numel());
        auto delta = read_delta(inputs.result, values + 1);
        if (!delta) return delta.error();
        auto after = common::with_delta(*base, *delta);
        if (!after) return common::with_context("the checked result", after.error());
        auto data = read_shards(inputs.shards);
        if (!data) return data.error();
        auto held_out = common::load_shard_file(inputs.held_out);
        if (!held_out) return common::with_context("held-out shard", held_out.error());
        auto workload = common::make_workload(unit.model, common::data_shape_of(*data, common::classes_of(*base)), 0);
        if (!workload) return workload.error();
        auto report =
            common::evaluate_loss_check(**workload, *base, *after, *data, *held_out, unit.hyper, unit.check->samples);
        if (!report) return report.error();
        CheckOutput output;
        const auto bytes = common::loss_report_bytes(*report);
        output.report.assign(bytes.begin(), bytes.end());
        auto& m = output.metrics;
        m.samples = static_cast<std::int64_t>(2 * (report->held_out_before.size() + report->own_before.size()));
        m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        m.samples_per_s = m.seconds > 0 ? static_cast<double>(m.samples) / m.seconds : 0;
        m.loss_start = mean_of(report->own_before);
        m.loss_end = mean_of(report->own_after);
        return output;
    } catch (const c10::Error& error) {
        return common::make_error(std::string("the loss check: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::client
