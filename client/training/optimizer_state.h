// A volunteer's inner AdamW state, kept from one work unit of a task to the next as DiLoCo's
// workers keep theirs (docs/plans/async_training.md): the moments of every parameter by name
// and the step count they share. Plain tensors, no torch. In memory for now; the client's
// state file comes with the protocol's `optimizer` field (issue 29).
#pragma once

#include <cstdint>
#include <string>

#include "delta_codec.h"

namespace tessera::client {

struct KeptOptimizerState {
    std::string task_id;  // the task and model preset the moments belong to
    std::string model;
    std::int64_t steps = 0;
    common::NamedTensors exp_avg, exp_avg_sq;  // by parameter name, f32
    bool empty() const { return steps == 0; }
};

}  // namespace tessera::client
