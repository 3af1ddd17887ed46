// Reading a stored result's delta file (`results/<wu_id>.delta`), decoded and bounded.
#pragma once

#include <cstdint>
#include <string>

#include "delta_codec.h"
#include "state_dir.h"

namespace tessera::server {

// The delta of result `assignment_id`, with at most `max_values` values over all tensors.
common::Result<common::NamedTensors> read_result_delta(const StateDir& state, const std::string& assignment_id,
                                                       std::int64_t max_values);

}  // namespace tessera::server
