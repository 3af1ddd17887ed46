// Tensor conversions; c10::Error from torch is caught here, at the module boundary.
#include "tensor_convert.h"

#include <torch/torch.h>

#include <cstring>
#include <optional>

namespace tessera::common {
namespace {

torch::Dtype torch_dtype(DType dtype) {
    switch (dtype) {
        case DType::F32: return torch::kFloat32;
        case DType::F16: return torch::kFloat16;
        case DType::BF16: return torch::kBFloat16;
        case DType::I8: return torch::kInt8;
        case DType::U8: return torch::kUInt8;
        case DType::I32: return torch::kInt32;
        case DType::I64: return torch::kInt64;
    }
    return torch::kFloat32;
}

std::optional<DType> file_dtype(torch::Dtype dtype) {
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::U8, DType::I32, DType::I64})
        if (torch_dtype(d) == dtype) return d;
    return std::nullopt;
}

}  // namespace

Result<torch::Tensor> to_torch(const TensorView& view) {
    try {
        auto tensor = torch::empty(view.shape, torch::TensorOptions().dtype(torch_dtype(view.dtype)));
        if (!view.data.empty()) std::memcpy(tensor.data_ptr(), view.data.data(), view.data.size());
        return tensor;
    } catch (const c10::Error& error) {
        return make_error("tensor \"" + view.name + "\": " + error.what_without_backtrace());
    }
}

Result<TorchTensorMap> to_torch_map(const TensorFile& file) {
    TorchTensorMap out;
    for (const auto& view : file.tensors()) {
        auto tensor = to_torch(view);
        if (!tensor) return tensor.error();
        out.emplace(view.name, std::move(tensor).value());
    }
    return out;
}

Result<Bytes> to_safetensors(const TorchTensorMap& tensors, const TensorMetadata& metadata) {
    std::vector<torch::Tensor> keep_alive;  // contiguous CPU copies the views point into
    std::vector<TensorView> views;
    try {
        for (const auto& [name, tensor] : tensors) {
            auto dtype = file_dtype(tensor.scalar_type());
            if (!dtype) return make_error("tensor \"" + name + "\" has a dtype safetensors cannot hold here");
            auto cpu = tensor.detach().to(torch::kCPU).contiguous();
            keep_alive.push_back(cpu);
            auto bytes = static_cast<std::size_t>(cpu.numel()) * cpu.element_size();
            views.push_back(
                {name, *dtype, cpu.sizes().vec(), ByteView(static_cast<const std::uint8_t*>(cpu.data_ptr()), bytes)});
        }
    } catch (const c10::Error& error) {
        return make_error(std::string("cannot serialise tensors: ") + error.what_without_backtrace());
    }
    return write_safetensors(views, metadata);
}

NamedTensors to_named_f32(const TorchTensorMap& tensors) {
    NamedTensors out;
    for (const auto& [name, tensor] : tensors) {
        auto cpu = tensor.detach().to(torch::kCPU, torch::kFloat32).contiguous();
        const float* data = cpu.data_ptr<float>();
        out.push_back({name, cpu.sizes().vec(), std::vector<float>(data, data + cpu.numel())});
    }
    return out;
}

TorchTensorMap from_named_f32(const NamedTensors& tensors) {
    TorchTensorMap out;
    for (const auto& t : tensors) {
        auto tensor = torch::empty(t.shape, torch::kFloat32);
        if (!t.values.empty()) std::memcpy(tensor.data_ptr<float>(), t.values.data(), t.values.size() * 4);
        out.emplace(t.name, tensor);
    }
    return out;
}

}  // namespace tessera::common
