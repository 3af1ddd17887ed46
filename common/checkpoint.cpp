// Checkpoint files: safetensors with F32 tensors and tessera metadata.
#include "checkpoint.h"

#include "named_tensor_file.h"

namespace tessera::common {

Result<Bytes> write_checkpoint(const NamedTensors& tensors, const CheckpointInfo& info) {
    return write_named_tensors(tensors, {{"format", "tessera.checkpoint"},
                                         {"task", info.task_id},
                                         {"model", info.model},
                                         {"version", std::to_string(info.version)}});
}

Result<NamedTensors> read_checkpoint(ByteView bytes) {
    auto file = read_named_tensors(bytes);
    if (!file) return with_context("checkpoint", file.error());
    return std::move(file->tensors);
}

}  // namespace tessera::common
