// Named f32 tensors as a safetensors file with metadata, and back: what checkpoints and the
// volunteer's error-feedback residual are written as.
#pragma once

#include "bytes.h"
#include "delta_codec.h"
#include "result.h"
#include "safetensors.h"

namespace tessera::common {

Result<Bytes> write_named_tensors(const NamedTensors& tensors, const TensorMetadata& metadata);

struct NamedTensorFile {
    NamedTensors tensors;  // every tensor read as f32, sorted by name
    TensorMetadata metadata;
};

Result<NamedTensorFile> read_named_tensors(ByteView bytes);

}  // namespace tessera::common
