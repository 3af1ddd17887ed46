// The per-sample losses the contribution checks compare (docs/operations.md, "Validation"),
// computed alike by the server's checks and by a volunteer's loss-check unit: the stratified t
// grid (EvalGrid::Stratified) with the evaluation's fixed noise, on the CPU.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "../loss_report.h"
#include "../protocol.h"
#include "../result.h"
#include "shard_data.h"
#include "tensor_convert.h"
#include "workload.h"

namespace tessera::common {

// `weights` loaded into `workload`, the losses of the first `max_samples` rows of `data`, or of
// `rows` among them only (increasing), each as the whole evaluation gives it.
Result<std::vector<double>> check_losses(Workload& workload, const TorchTensorMap& weights, const ShardData& data,
                                         std::int64_t max_samples, const std::vector<std::int64_t>& rows = {});

// The rows of a unit's data (`unit_data`, its shards in order) whose losses the checks compare:
// the last `samples` of its first epoch (first_epoch_rows), as a shard of their own.
ShardData own_rows(const ShardData& unit_data, const Hyperparameters& hyper, std::int64_t samples);

// A loss-check unit's answer: `base` and `base` + `delta` on the first `samples` rows of
// `held_out` and on the unit's own rows (own_rows of `unit_data`).
Result<LossReport> evaluate_loss_check(Workload& workload, const TorchTensorMap& base, const TorchTensorMap& after,
                                       const ShardData& unit_data, const ShardData& held_out,
                                       const Hyperparameters& hyper, std::int64_t samples);

// `base` + `delta`, tensor by tensor; an error names a tensor the two do not share or whose
// shapes differ.
Result<TorchTensorMap> with_delta(const TorchTensorMap& base, const TorchTensorMap& delta);

}  // namespace tessera::common
