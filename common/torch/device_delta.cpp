// Int8 delta encoding on the device that holds the weights.
#include "device_delta.h"

#include <torch/torch.h>

#include "../int8_blockwise.h"
#ifdef TESSERA_CUDA_KERNELS
#include "../cuda/delta_int8.h"
#endif

namespace tessera::common {
namespace {

Result<QuantizedTensor> quantize_on_gpu(const std::string& name, const torch::Tensor& theta_h, const torch::Tensor& theta0) {
#ifdef TESSERA_CUDA_KERNELS
    auto h = theta_h.detach().to(torch::kFloat32).contiguous();
    auto base = theta0.detach().to(h.device(), torch::kFloat32).contiguous();
    auto n = h.numel();
    auto q = torch::empty({n}, h.options().dtype(torch::kInt8));
    auto scales = torch::empty({static_cast<std::int64_t>(int8_block_count(static_cast<std::size_t>(n)))}, h.options());
    auto error = delta_int8_quantize_cuda(h.data_ptr<float>(), base.data_ptr<float>(), n, q.data_ptr<std::int8_t>(),
                                          scales.data_ptr<float>(), nullptr);
    if (!error.empty()) return make_error("CUDA delta kernel failed on \"" + name + "\": " + error);
    auto q_host = q.cpu();
    auto scales_host = scales.cpu();
    return QuantizedTensor{name, h.sizes().vec(),
                           std::vector<std::int8_t>(q_host.data_ptr<std::int8_t>(), q_host.data_ptr<std::int8_t>() + n),
                           std::vector<float>(scales_host.data_ptr<float>(), scales_host.data_ptr<float>() + scales_host.numel())};
#else
    (void)theta_h;
    (void)theta0;
    return make_error("tensor \"" + name + "\" is on a GPU but this build has no CUDA kernels");
#endif
}

QuantizedTensor quantize_on_cpu(const std::string& name, const torch::Tensor& theta_h, const torch::Tensor& theta0) {
    auto delta = (theta_h.detach().to(torch::kCPU, torch::kFloat32) - theta0.detach().to(torch::kCPU, torch::kFloat32)).contiguous();
    auto n = static_cast<std::size_t>(delta.numel());
    QuantizedTensor out{name, delta.sizes().vec(), std::vector<std::int8_t>(n), std::vector<float>(int8_block_count(n))};
    quantize_int8_blockwise({delta.data_ptr<float>(), n}, out.q, out.scales);
    return out;
}

}  // namespace

bool cuda_delta_kernel_built() {
#ifdef TESSERA_CUDA_KERNELS
    return true;
#else
    return false;
#endif
}

Result<Bytes> encode_int8_delta(const TorchTensorMap& theta_h, const TorchTensorMap& theta0) {
    try {
        std::vector<QuantizedTensor> tensors;
        for (const auto& [name, tensor] : theta_h) {
            auto base = theta0.find(name);
            if (base == theta0.end() || base->second.sizes() != tensor.sizes())
                return make_error("θ0 lacks tensor \"" + name + "\" or its shape differs");
            if (tensor.is_cuda()) {
                auto quantized = quantize_on_gpu(name, tensor, base->second);
                if (!quantized) return quantized.error();
                tensors.push_back(std::move(quantized).value());
            } else {
                tensors.push_back(quantize_on_cpu(name, tensor, base->second));
            }
        }
        return write_int8_delta(tensors);
    } catch (const c10::Error& error) {
        return make_error(std::string("delta encoding failed: ") + error.what_without_backtrace());
    }
}

}  // namespace tessera::common
