// Stored result deltas.
#include "result_files.h"

#include <atomic>

#include "logger.h"
#include "safetensors.h"

namespace tessera::server {

common::Status ResultFiles::write(const std::string& assignment_id, common::ByteView delta) {
    return files_.write_atomic(state_.result_file(assignment_id), delta);
}

common::Status ResultFiles::adopt(const std::string& assignment_id, const std::filesystem::path& spooled) {
    return files_.adopt(spooled, state_.result_file(assignment_id));
}

common::Status ResultFiles::adopt_moments(const std::string& assignment_id, const std::filesystem::path& spooled) {
    return files_.adopt(spooled, state_.moments_file(assignment_id));
}

common::Result<std::optional<common::Bytes>> ResultFiles::read_moments(const std::string& assignment_id) const {
    auto file = state_.moments_file(assignment_id);
    if (!files_.exists(file)) return std::optional<common::Bytes>();
    auto bytes = files_.read(file, common::kMaxModelBytes);
    if (!bytes) return bytes.error();
    return std::optional<common::Bytes>(std::move(*bytes));
}

bool ResultFiles::has_moments(const std::string& assignment_id) const {
    return files_.exists(state_.moments_file(assignment_id));
}

common::Result<common::Bytes> ResultFiles::read_bytes(const std::string& assignment_id) const {
    return files_.read(state_.result_file(assignment_id), common::kMaxModelBytes);
}

namespace {

std::atomic<std::uint64_t> decodes{0};

std::uint64_t bytes_of(const common::NamedTensors& tensors) {
    std::uint64_t bytes = 0;
    for (const auto& t : tensors) bytes += t.values.size() * sizeof(float);
    return bytes;
}

}  // namespace

void ResultFiles::keep_decoded(const std::string& assignment_id, common::DecodedDelta decoded) const {
    auto bytes = bytes_of(decoded.tensors);
    if (bytes > kept_bytes_) return;
    std::lock_guard lock(mutex_);
    if (kept_.deltas.count(assignment_id) > 0) return;
    while (kept_.bytes + bytes > kept_bytes_ && !kept_.order.empty()) {
        auto oldest = kept_.deltas.find(kept_.order.front());
        kept_.order.pop_front();
        if (oldest == kept_.deltas.end()) continue;  // taken or removed already
        kept_.bytes -= bytes_of(oldest->second.tensors);
        kept_.deltas.erase(oldest);
    }
    if (kept_.order.size() > 2 * kept_.deltas.size() + 64)  // ids taken or removed since
        std::erase_if(kept_.order, [&](const std::string& id) { return kept_.deltas.count(id) == 0; });
    kept_.deltas.emplace(assignment_id, std::move(decoded));
    kept_.order.push_back(assignment_id);
    kept_.bytes += bytes;
}

std::optional<common::DecodedDelta> ResultFiles::take_kept(const std::string& assignment_id) const {
    std::lock_guard lock(mutex_);
    auto found = kept_.deltas.find(assignment_id);
    if (found == kept_.deltas.end()) return std::nullopt;
    auto decoded = std::move(found->second);
    kept_.bytes -= bytes_of(decoded.tensors);
    kept_.deltas.erase(found);
    if (kept_.deltas.empty()) kept_.order.clear();
    return decoded;
}

common::Result<common::NamedTensors> ResultFiles::read(const std::string& assignment_id,
                                                       std::int64_t max_values) const {
    if (auto kept = take_kept(assignment_id)) return std::move(kept->tensors);
    auto decoded = read_decoded(assignment_id, max_values);
    if (!decoded) return decoded.error();
    return std::move(decoded->tensors);
}

common::Result<common::DecodedDelta> ResultFiles::read_decoded(const std::string& assignment_id,
                                                               std::int64_t max_values) const {
    {
        std::lock_guard lock(mutex_);
        if (auto found = kept_.deltas.find(assignment_id); found != kept_.deltas.end()) return found->second;
    }
    auto bytes = read_bytes(assignment_id);
    if (!bytes) return bytes.error();
    return decode(*bytes, max_values);
}

common::Result<common::DecodedDelta> ResultFiles::decode(common::ByteView bytes, std::int64_t max_values) {
    decodes.fetch_add(1, std::memory_order_relaxed);
    common::DeltaDecodeLimits limits;
    limits.max_elements = static_cast<std::uint64_t>(max_values);
    return common::decode_delta(bytes, limits);
}

std::uint64_t result_deltas_decoded() { return decodes.load(std::memory_order_relaxed); }

void ResultFiles::remove(const std::string& assignment_id) {
    take_kept(assignment_id);
    if (auto status = files_.remove(state_.result_file(assignment_id)); !status)
        common::process_log().error("result_file", "result files: " + status.message());
    remove_moments(assignment_id);
}

void ResultFiles::remove_moments(const std::string& assignment_id) {
    if (auto moments = state_.moments_file(assignment_id); files_.exists(moments))
        if (auto status = files_.remove(moments); !status)
            common::process_log().error("result_file", "result files: " + status.message());
}

}  // namespace tessera::server
