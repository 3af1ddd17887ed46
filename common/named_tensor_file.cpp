// Named f32 tensors to and from safetensors.
#include "named_tensor_file.h"

#include <algorithm>

namespace tessera::common {

Result<Bytes> write_named_tensors(const NamedTensors& tensors, const TensorMetadata& metadata) {
    std::vector<TensorView> views;
    for (const auto& t : tensors) {
        TensorView view;
        view.name = t.name;
        view.dtype = DType::F32;
        view.shape = t.shape;
        view.data = {reinterpret_cast<const std::uint8_t*>(t.values.data()), t.values.size() * sizeof(float)};
        views.push_back(std::move(view));
    }
    return write_safetensors(views, metadata);
}

Result<NamedTensorFile> read_named_tensors(ByteView bytes) {
    auto file = parse_safetensors(bytes);
    if (!file) return file.error();
    NamedTensorFile out;
    out.metadata = file->metadata();
    for (const auto& view : file->tensors()) {
        auto values = read_as_f32(view);
        if (!values) return with_context("tensor " + view.name, values.error());
        out.tensors.push_back({view.name, view.shape, std::move(*values)});
    }
    std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return out;
}

}  // namespace tessera::common
