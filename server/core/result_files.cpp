// Stored result deltas.
#include "result_files.h"

#include "file_io.h"

namespace tessera::server {

common::Result<common::NamedTensors> read_result_delta(const StateDir& state, const std::string& assignment_id,
                                                       std::int64_t max_values) {
    auto bytes = common::read_file(state.result_file(assignment_id), std::uint64_t{8} << 30);
    if (!bytes) return bytes.error();
    common::DeltaDecodeLimits limits;
    limits.max_elements = static_cast<std::uint64_t>(max_values);
    auto decoded = common::decode_delta(*bytes, limits);
    if (!decoded) return decoded.error();
    return std::move(decoded->tensors);
}

}  // namespace tessera::server
