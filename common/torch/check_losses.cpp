// The contribution checks' per-sample losses (check_losses.h).
#include "check_losses.h"

#include <torch/torch.h>

#include "model_state.h"
#include "trainer.h"

namespace tessera::common {
namespace {

std::vector<double> to_vector(const torch::Tensor& values) {
    auto contiguous = values.to(torch::kFloat64).contiguous();
    const auto* data = contiguous.data_ptr<double>();
    return std::vector<double>(data, data + contiguous.numel());
}

}  // namespace

Result<std::vector<double>> check_losses(Workload& workload, const TorchTensorMap& weights, const ShardData& data,
                                         std::int64_t max_samples, const std::vector<std::int64_t>& rows) {
    torch::NoGradGuard no_grad;
    auto status = load_state(*workload.module(), weights);
    if (!status) return status.error();
    workload.set_eval_grid(EvalGrid::Stratified);
    workload.set_eval_rows(rows);
    auto losses = workload.evaluate(data, torch::kCPU, max_samples).sample_losses;
    workload.set_eval_rows({});
    if (losses.size(0) != static_cast<std::int64_t>(rows.empty() ? std::min(max_samples, data.size()) : rows.size()))
        return make_error("rows outside the evaluated data");
    return to_vector(losses);
}

ShardData own_rows(const ShardData& unit_data, const Hyperparameters& hyper, std::int64_t samples) {
    auto rows = first_epoch_rows(unit_data.size(), hyper.batch_size, hyper.local_steps,
                                 static_cast<std::uint64_t>(hyper.seed), samples);
    return unit_data.rows(rows);
}

Result<LossReport> evaluate_loss_check(Workload& workload, const TorchTensorMap& base, const TorchTensorMap& after,
                                       const ShardData& unit_data, const ShardData& held_out,
                                       const Hyperparameters& hyper, std::int64_t samples) {
    auto own = own_rows(unit_data, hyper, samples);
    LossReport report;
    struct Part {
        std::vector<double>* losses;
        const TorchTensorMap* weights;
        const ShardData* data;
    };
    for (auto part : {Part{&report.held_out_before, &base, &held_out}, Part{&report.held_out_after, &after, &held_out},
                      Part{&report.own_before, &base, &own}, Part{&report.own_after, &after, &own}}) {
        auto losses = check_losses(workload, *part.weights, *part.data, samples);
        if (!losses) return losses.error();
        *part.losses = std::move(*losses);
    }
    return report;
}

Result<TorchTensorMap> with_delta(const TorchTensorMap& base, const TorchTensorMap& delta) {
    if (base.size() != delta.size())
        return make_error("the delta has " + std::to_string(delta.size()) + " tensors; the model " +
                          std::to_string(base.size()));
    TorchTensorMap after;
    for (const auto& [name, value] : base) {
        auto found = delta.find(name);
        if (found == delta.end()) return make_error("the delta has no tensor \"" + name + "\"");
        if (!found->second.sizes().equals(value.sizes()))
            return make_error("the delta's tensor \"" + name + "\" has another shape than the model's");
        after.emplace(name, value + found->second.to(value.dtype()));
    }
    return after;
}

}  // namespace tessera::common
