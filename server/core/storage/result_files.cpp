// Stored result deltas.
#include "result_files.h"

#include "logger.h"
#include "safetensors.h"

namespace tessera::server {

common::Status ResultFiles::write(const std::string& assignment_id, common::ByteView delta) {
    return files_.write_atomic(state_.result_file(assignment_id), delta);
}

common::Status ResultFiles::adopt(const std::string& assignment_id, const std::filesystem::path& spooled) {
    return files_.adopt(spooled, state_.result_file(assignment_id));
}

common::Result<common::Bytes> ResultFiles::read_bytes(const std::string& assignment_id) const {
    return files_.read(state_.result_file(assignment_id), common::kMaxModelBytes);
}

common::Result<common::NamedTensors> ResultFiles::read(const std::string& assignment_id,
                                                       std::int64_t max_values) const {
    auto decoded = read_decoded(assignment_id, max_values);
    if (!decoded) return decoded.error();
    return std::move(decoded->tensors);
}

common::Result<common::DecodedDelta> ResultFiles::read_decoded(const std::string& assignment_id,
                                                               std::int64_t max_values) const {
    auto bytes = read_bytes(assignment_id);
    if (!bytes) return bytes.error();
    common::DeltaDecodeLimits limits;
    limits.max_elements = static_cast<std::uint64_t>(max_values);
    return common::decode_delta(*bytes, limits);
}

void ResultFiles::remove(const std::string& assignment_id) {
    if (auto status = files_.remove(state_.result_file(assignment_id)); !status)
        common::process_log().error("result_file", "result files: " + status.message());
}

}  // namespace tessera::server
