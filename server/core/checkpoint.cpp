// Checkpoint files: safetensors with F32 tensors and tessera metadata.
#include "checkpoint.h"

#include "named_tensor_file.h"

namespace tessera::server {

common::Result<common::Bytes> write_checkpoint(const common::NamedTensors& tensors, const CheckpointInfo& info) {
    return common::write_named_tensors(tensors, {{"format", "tessera.checkpoint"},
                                                 {"task", info.task_id},
                                                 {"model", info.model},
                                                 {"version", std::to_string(info.version)}});
}

common::Result<common::NamedTensors> read_checkpoint(common::ByteView bytes) {
    auto file = common::read_named_tensors(bytes);
    if (!file) return common::with_context("checkpoint", file.error());
    return std::move(file->tensors);
}

}  // namespace tessera::server
