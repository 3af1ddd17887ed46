// A work unit's random draws as tensors, from the specified streams of unit_random.h (docs/
// protocol.md, "Randomness"), made on the CPU so that every device trains on the same numbers.
#pragma once

#include <torch/types.h>

#include "../unit_random.h"

namespace tessera::common {

// normal(0 …) of the stream, f32, in the given shape (row-major).
torch::Tensor unit_normal_tensor(std::uint64_t seed, DrawPurpose purpose, std::int64_t step,
                                 at::IntArrayRef shape);
// uniform(i) < threshold, bool, in the given shape (row-major).
torch::Tensor unit_below_tensor(std::uint64_t seed, DrawPurpose purpose, std::int64_t step, at::IntArrayRef shape,
                                double threshold);
// The permutation of `n` rows for an epoch (purpose BatchOrder, step = epoch), i64.
torch::Tensor unit_permutation_tensor(std::uint64_t seed, std::int64_t epoch, std::int64_t n);

// The tokens each of `rows` samples keeps under patch masking (purpose PatchMask; unit_kept_tokens),
// (rows, kept) i64, ascending in each row.
torch::Tensor unit_kept_tokens_tensor(std::uint64_t seed, std::int64_t step, std::int64_t rows, std::int64_t tokens,
                                      std::int64_t kept);

// To the training device. A copy to a GPU from pinned memory does not wait for the GPU; one
// from pageable memory would, every step.
torch::Tensor to_device(const torch::Tensor& drawn, torch::Device device);

}  // namespace tessera::common
