// Unit draws as CPU tensors.
#include "unit_draws.h"

#include <torch/torch.h>

namespace tessera::common {
namespace {

std::int64_t count_of(at::IntArrayRef shape) {
    std::int64_t count = 1;
    for (auto size : shape) count *= size;
    return count;
}

}  // namespace

torch::Tensor unit_normal_tensor(std::uint64_t seed, DrawPurpose purpose, std::int64_t step,
                                 at::IntArrayRef shape) {
    auto values = unit_normals(UnitStream(seed, purpose, static_cast<std::uint64_t>(step)),
                               static_cast<std::size_t>(count_of(shape)));
    return torch::from_blob(values.data(), shape, torch::kFloat32).clone();
}

torch::Tensor unit_below_tensor(std::uint64_t seed, DrawPurpose purpose, std::int64_t step, at::IntArrayRef shape,
                                double threshold) {
    auto below = unit_below(UnitStream(seed, purpose, static_cast<std::uint64_t>(step)),
                            static_cast<std::size_t>(count_of(shape)), threshold);
    return torch::from_blob(below.data(), shape, torch::kUInt8).to(torch::kBool);
}

torch::Tensor unit_permutation_tensor(std::uint64_t seed, std::int64_t epoch, std::int64_t n) {
    auto order = unit_permutation(UnitStream(seed, DrawPurpose::BatchOrder, static_cast<std::uint64_t>(epoch)), n);
    return torch::from_blob(order.data(), {n}, torch::kInt64).clone();
}

torch::Tensor unit_kept_tokens_tensor(std::uint64_t seed, std::int64_t step, std::int64_t rows, std::int64_t tokens,
                                      std::int64_t kept) {
    auto keep = unit_kept_tokens(UnitStream(seed, DrawPurpose::PatchMask, static_cast<std::uint64_t>(step)), rows,
                                 tokens, kept);
    return torch::from_blob(keep.data(), {rows, kept}, torch::kInt64).clone();
}

torch::Tensor to_device(const torch::Tensor& drawn, torch::Device device) {
    return device.is_cuda() ? drawn.pin_memory().to(device, /*non_blocking=*/true) : drawn.to(device);
}

}  // namespace tessera::common
