// Model checkpoints: the model's f32 tensors as a safetensors file (readable from Python),
// with metadata naming the task, version and preset. No torch: the aggregator works on
// NamedTensors.
#pragma once

#include <cstdint>
#include <string>

#include "bytes.h"
#include "delta_codec.h"
#include "result.h"

namespace tessera::common {

struct CheckpointInfo {
    std::string task_id;
    std::string model;
    std::int64_t version = 0;
};

Result<Bytes> write_checkpoint(const NamedTensors& tensors, const CheckpointInfo& info);
// Reads every tensor as f32, sorted by name (the order delta files use).
Result<NamedTensors> read_checkpoint(ByteView bytes);

}  // namespace tessera::common
