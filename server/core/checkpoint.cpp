// Checkpoint files: safetensors with F32 tensors and tessera metadata.
#include "checkpoint.h"

#include <algorithm>
#include <cstring>

#include "safetensors.h"

namespace tessera::server {

common::Result<common::Bytes> write_checkpoint(const common::NamedTensors& tensors, const CheckpointInfo& info) {
    std::vector<common::TensorView> views;
    for (const auto& t : tensors) {
        common::TensorView view;
        view.name = t.name;
        view.dtype = common::DType::F32;
        view.shape = t.shape;
        view.data = {reinterpret_cast<const std::uint8_t*>(t.values.data()), t.values.size() * sizeof(float)};
        views.push_back(std::move(view));
    }
    return common::write_safetensors(views, {{"format", "tessera.checkpoint"},
                                             {"task", info.task_id},
                                             {"model", info.model},
                                             {"version", std::to_string(info.version)}});
}

common::Result<common::NamedTensors> read_checkpoint(common::ByteView bytes) {
    auto file = common::parse_safetensors(bytes);
    if (!file) return common::with_context("checkpoint", file.error());
    common::NamedTensors tensors;
    for (const auto& view : file->tensors()) {
        auto values = common::read_as_f32(view);
        if (!values) return common::with_context("checkpoint tensor " + view.name, values.error());
        tensors.push_back({view.name, view.shape, std::move(*values)});
    }
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return tensors;
}

}  // namespace tessera::server
