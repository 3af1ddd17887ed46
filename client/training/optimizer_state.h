// A volunteer's inner AdamW state, kept from one work unit of a task to the next as DiLoCo's
// workers keep theirs: the moments of every parameter by name and the step count they share.
// Units that ask for it (`optimizer: kept`) start from it and replace it. It lives in the
// state directory as a safetensors file naming the task and model it belongs to, survives
// restarts, and is dropped with a message when a unit of another task or model comes
// (docs/tensor_format.md, "Inner optimizer state"). Plain tensors, no torch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "bytes.h"
#include "delta_codec.h"
#include "result.h"

namespace tessera::client {

// 8 bytes per parameter; a model whose moments would exceed this is trained with fresh ones
// (dit-b's are 718 MB).
constexpr std::uint64_t kMaxOptimizerStateBytes = 2 * common::kGiB;

struct KeptOptimizerState {
    std::string task_id;  // the task and model preset the moments belong to
    std::string model;
    std::int64_t steps = 0;
    common::NamedTensors exp_avg, exp_avg_sq;  // by parameter name, sorted, f32
    bool empty() const { return steps == 0; }
};

// Nothing kept when the file is missing; an error when it is unreadable, not one, or
// inconsistent (the two moments' tensors differ, a value is not finite, no step count).
common::Result<KeptOptimizerState> load_optimizer_state(const std::filesystem::path& file);
// Written atomically; an empty state removes the file.
common::Status save_optimizer_state(const std::filesystem::path& file, const KeptOptimizerState& state);

// The bytes of the state's moments (8 per parameter).
std::uint64_t optimizer_state_bytes(const KeptOptimizerState& state);

}  // namespace tessera::client
