// The volunteer's kept optimizer state file (optimizer_state.h).
#include "optimizer_state.h"

#include "file_io.h"
#include "optimizer_moments.h"
#include "state_file.h"

namespace tessera::client {

common::Result<KeptOptimizerState> load_optimizer_state(const std::filesystem::path& file) {
    std::error_code missing;
    if (!std::filesystem::exists(file, missing)) return KeptOptimizerState{};
    auto bytes = common::read_file(file, kMaxOptimizerStateBytes + (std::uint64_t{1} << 24));
    if (!bytes) return bytes.error();
    auto read = common::read_optimizer_moments(*bytes);
    if (!read) return common::with_context(file.string(), read.error());
    auto& moments = read->moments;
    return KeptOptimizerState{metadata_field(read->metadata, "task"), metadata_field(read->metadata, "model"),
                              moments.steps, std::move(moments.exp_avg), std::move(moments.exp_avg_sq)};
}

common::Status save_optimizer_state(const std::filesystem::path& file, const KeptOptimizerState& state) {
    if (state.empty()) {
        std::error_code ignored;
        std::filesystem::remove(file, ignored);
        return {};
    }
    auto bytes = common::write_optimizer_moments({state.steps, state.exp_avg, state.exp_avg_sq},
                                                 {{"task", state.task_id}, {"model", state.model}});
    if (!bytes) return bytes.error();
    return common::write_file_atomic(file, *bytes);
}

std::uint64_t optimizer_state_bytes(const KeptOptimizerState& state) {
    std::uint64_t values = 0;
    for (const auto& t : state.exp_avg) values += t.values.size();
    for (const auto& t : state.exp_avg_sq) values += t.values.size();
    return values * sizeof(float);
}

}  // namespace tessera::client
