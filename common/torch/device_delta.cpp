// Delta encoding on the device that holds the delta.
#include "device_delta.h"

#include <torch/torch.h>

#include <cmath>

#include "../int8_blockwise.h"
#include "../lowbit_blockwise.h"
#ifdef TESSERA_CUDA_KERNELS
#include "../cuda/delta_int8.h"
#endif

namespace tessera::common {
namespace {

// The bytes of a tensor, copied to the host.
Bytes host_bytes(const torch::Tensor& tensor) {
    auto host = tensor.contiguous().cpu();
    const auto* begin = static_cast<const std::uint8_t*>(host.data_ptr());
    return Bytes(begin, begin + host.numel() * static_cast<std::int64_t>(host.element_size()));
}

template <class T>
std::vector<T> host_vector(const torch::Tensor& tensor) {
    auto host = tensor.contiguous().cpu();
    return std::vector<T>(host.data_ptr<T>(), host.data_ptr<T>() + host.numel());
}

// Blockwise int8 of flat f32 `values`: the CUDA kernel on a GPU when built, else the CPU codec.
Status encode_int8(const std::string& name, const torch::Tensor& values, EncodedTensor& out) {
#ifdef TESSERA_CUDA_KERNELS
    if (values.is_cuda()) {
        auto n = values.numel();
        auto q = torch::empty({n}, values.options().dtype(torch::kInt8));
        auto scales =
            torch::empty({static_cast<std::int64_t>(int8_block_count(static_cast<std::size_t>(n)))}, values.options());
        auto error = delta_int8_quantize_cuda(values.data_ptr<float>(), nullptr, n, q.data_ptr<std::int8_t>(),
                                              scales.data_ptr<float>(), nullptr);
        if (!error.empty()) return make_error("CUDA delta kernel failed on \"" + name + "\": " + error);
        out.values = host_bytes(q);
        out.scales = host_vector<float>(scales);
        return {};
    }
#endif
    (void)name;
    auto host = host_vector<float>(values);
    std::vector<std::int8_t> q(host.size());
    out.scales.resize(int8_block_count(host.size()));
    quantize_int8_blockwise(host, q, out.scales);
    const auto* begin = reinterpret_cast<const std::uint8_t*>(q.data());
    out.values.assign(begin, begin + q.size());
    return {};
}

// One synchronisation for the finiteness of all tensors; the name of a bad one if any.
Status check_finite(const TorchTensorMap& delta) {
    std::vector<torch::Tensor> finite;
    for (const auto& [name, tensor] : delta) finite.push_back(torch::isfinite(tensor).all());
    if (finite.empty() || torch::stack(finite).all().item<bool>()) return {};
    for (const auto& [name, tensor] : delta)
        if (!torch::isfinite(tensor).all().item<bool>())
            return make_error("delta encoder: tensor \"" + name + "\" holds a non-finite value");
    return {};
}

}  // namespace

Result<Bytes> encode_delta_with_torch(const TorchTensorMap& delta, const DeltaEncoding& encoding) {
    if (!(encoding.topk_fraction > 0.0 && encoding.topk_fraction <= 1.0))
        return make_error("delta encoder: top-k fraction must be in (0, 1]");
    try {
        torch::NoGradGuard no_grad;
        if (auto finite = check_finite(delta); !finite) return finite.error();
        bool dense = encoding.topk_fraction >= 1.0;
        std::vector<EncodedTensor> tensors;
        for (const auto& [name, tensor] : delta) {
            EncodedTensor out{name, tensor.sizes().vec(), {}, {}, {}};
            auto values = tensor.detach().to(torch::kFloat32).contiguous().view({-1});
            if (!dense) {
                auto n = values.numel();
                auto k =
                    std::min(n, static_cast<std::int64_t>(std::ceil(encoding.topk_fraction * static_cast<double>(n))));
                auto kept = std::get<0>(std::get<1>(values.abs().topk(k)).sort());
                out.indices = host_vector<std::int32_t>(kept.to(torch::kInt32));
                values = values.index_select(0, kept);
            }
            switch (encoding.dtype) {
                case DeltaDType::F32: out.values = host_bytes(values); break;
                case DeltaDType::BF16: out.values = host_bytes(values.to(torch::kBFloat16)); break;
                case DeltaDType::Int8:
                    if (auto status = encode_int8(name, values, out); !status) return status.error();
                    break;
                case DeltaDType::Int4:
                case DeltaDType::Int2: {
                    // Low-bit deltas are top-k in practice: few values, packed on the host.
                    auto packed = quantize_packed_blockwise(host_vector<float>(values), packed_bits(encoding.dtype));
                    out.values = std::move(packed.packed);
                    out.scales = std::move(packed.scales);
                    break;
                }
            }
            tensors.push_back(std::move(out));
        }
        return write_encoded_delta(tensors, encoding);
    } catch (const c10::Error& error) {
        return make_error(std::string("delta encoding failed: ") + error.what_without_backtrace());
    }
}

Result<Bytes> encode_delta_on_device(const TorchTensorMap& delta, const DeltaEncoding& encoding) {
    bool on_gpu = !delta.empty() && delta.begin()->second.is_cuda();
    for (const auto& [name, tensor] : delta)
        if (tensor.device() != delta.begin()->second.device())
            return make_error("delta encoder: tensor \"" + name + "\" is on another device than the rest");
    if (on_gpu) return encode_delta_with_torch(delta, encoding);
    auto encoded = encode_delta(to_named_f32(delta), encoding);
    if (!encoded) return encoded.error();
    return std::move(encoded->bytes);
}

}  // namespace tessera::common
