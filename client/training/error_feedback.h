// Error feedback kept across a volunteer's units: what its lossy codec (top-k, int8, int4,
// int2) left out of the last delta is added to the next one, so that dropped mass is delayed
// rather than lost. The residual lives in the state directory as a safetensors file naming
// the task and model it belongs to; it survives restarts and is dropped, with a message,
// when a unit of another task or model comes (docs/tensor_format.md, "Error feedback").
#pragma once

#include <filesystem>
#include <string>

#include "delta_codec.h"
#include "protocol.h"
#include "result.h"

namespace tessera::client {

struct ErrorFeedback {
    std::string task_id;
    std::string model;
    common::NamedTensors residual;  // sorted by name; empty: nothing carried
};

// Nothing carried when the file is missing; an error when it is unreadable or not one.
common::Result<ErrorFeedback> load_error_feedback(const std::filesystem::path& file);
// Written atomically; an empty residual removes the file.
common::Status save_error_feedback(const std::filesystem::path& file, const ErrorFeedback& feedback);

// True when the unit's codec loses nothing (dense f32), so there is nothing to carry.
bool lossless(const common::DeltaEncoding& encoding);

// Empty when `feedback` may be added to a delta of `unit` with this layout (sorted by name);
// otherwise why not, and the caller drops it.
std::string feedback_mismatch(const ErrorFeedback& feedback, const common::WorkUnit& unit,
                              const common::NamedTensors& layout);

// The carried residual is scaled down to at most this many times the norm of the delta it
// joins, and the excess dropped: a volunteer whose units are mostly replicas (which hold the
// residual) would otherwise send a stale residual many times its own delta, past the norm
// bounds and against the model's newer state.
inline constexpr double kMaxResidualRatio = 2.0;

// Scales `residual` so that its norm is at most kMaxResidualRatio × the norm of `delta`;
// returns the factor applied (1 when nothing was dropped).
double clip_residual(common::NamedTensors& residual, const common::NamedTensors& delta);

// input − what `encoded` decodes to: the residual of one encoding, for the next unit.
common::Result<common::NamedTensors> residual_after(const common::NamedTensors& input, common::ByteView encoded);

}  // namespace tessera::client
