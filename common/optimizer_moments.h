// AdamW's two moments of every parameter and the step count they share, as a safetensors file
// (docs/tensor_format.md, "Inner optimizer state"): what a volunteer keeps between the units of
// a task, and what it sends when a replay audit asks for the moments a unit started from
// (docs/protocol.md, "Moments for an audit"). Plain tensors, no torch.
#pragma once

#include <cstdint>
#include <string>

#include "bytes.h"
#include "delta_codec.h"
#include "result.h"
#include "safetensors.h"

namespace tessera::common {

// The metadata's `format`.
inline constexpr std::string_view kOptimizerStateFormat = "tessera.optimizer_state";

struct OptimizerMoments {
    std::int64_t steps = 0;
    NamedTensors exp_avg, exp_avg_sq;  // by parameter name, sorted, f32
};

// `metadata` adds to the file's own keys (format, steps): the volunteer names its task and model.
Result<Bytes> write_optimizer_moments(const OptimizerMoments& moments, TensorMetadata metadata = {});

struct OptimizerMomentsFile {
    OptimizerMoments moments;
    TensorMetadata metadata;
};
// An error when the bytes are not such a file, or are inconsistent: the two moments name
// different parameters or shapes, a value is not finite (or negative in the second), no step
// count above 0.
Result<OptimizerMomentsFile> read_optimizer_moments(ByteView bytes);

}  // namespace tessera::common
