// The data shape a task's model is built for, from its config (server/torch only: it needs
// LibTorch's workload header).
#pragma once

#include "task_config.h"
#include "torch/workload.h"

namespace tessera::server {

inline common::DataShape shape_of(const TaskConfig& config) {
    common::DataShape shape;
    shape.channels = config.sample_shape[0];
    shape.size = config.sample_shape[1];
    shape.num_classes = config.num_classes;
    shape.text_dim = config.text_dim;
    return shape;
}

}  // namespace tessera::server
