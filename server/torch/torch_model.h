// The server's uses of LibTorch, behind a torch-free header: building a task's initial
// weights (version 0) and the model probe that evaluates weights on the validation shard.
#pragma once

#include <filesystem>

#include "delta_codec.h"
#include "model_probe.h"
#include "task_config.h"

namespace tessera::server {

// The preset's seeded initial weights, sorted by name.
common::Result<common::NamedTensors> initial_weights(const TaskConfig& config);
// Probes that evaluate on the validation shard at `validation_shard`, loaded once and shared.
common::Result<ModelProbeFactory> make_torch_probe_factory(const TaskConfig& config,
                                                           const std::filesystem::path& validation_shard);

}  // namespace tessera::server
