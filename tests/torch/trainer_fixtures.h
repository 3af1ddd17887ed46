// What the trainer tests share: a shard of the small Fashion-MNIST latent dataset with seeded
// dit-tiny weights for it, and applying a delta.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "dataset_manifest.h"
#include "small_dataset.h"
#include "torch/model_state.h"
#include "torch/shard_data.h"
#include "torch/workload.h"

namespace tessera::testing {

inline std::pair<common::ShardData, common::TorchTensorMap> first_shard_and_weights() {
    const auto& dir = small_latent_dataset();
    auto manifest = common::load_dataset_manifest(dir / "dataset.json").value();
    auto data = common::load_shard_file(dir / manifest.train[0].file).value();
    auto theta0 = common::state_of(*common::make_workload("dit-tiny", common::data_shape_of(data, 10), 3).value()->module());
    return {data, theta0};
}

inline common::TorchTensorMap apply_delta(const common::TorchTensorMap& theta, const common::TorchTensorMap& delta) {
    common::TorchTensorMap out;
    for (const auto& [name, tensor] : theta) out.emplace(name, tensor + delta.at(name));
    return out;
}

}  // namespace tessera::testing
