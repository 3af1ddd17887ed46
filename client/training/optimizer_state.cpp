// The volunteer's kept optimizer state file (optimizer_state.h).
#include "optimizer_state.h"

#include <charconv>
#include <cmath>

#include "file_io.h"
#include "named_tensor_file.h"
#include "state_file.h"

namespace tessera::client {
namespace {

constexpr std::string_view kFormat = "tessera.optimizer_state";
constexpr std::string_view kFirst = "exp_avg/";
constexpr std::string_view kSecond = "exp_avg_sq/";

void append_prefixed(common::NamedTensors& out, const common::NamedTensors& tensors, std::string_view prefix) {
    for (const auto& t : tensors) out.push_back({std::string(prefix) + t.name, t.shape, t.values});
}

// The moments of one prefix, the prefix taken off, in the file's (sorted) order.
common::NamedTensors take_prefixed(common::NamedTensors& tensors, std::string_view prefix) {
    common::NamedTensors part;
    for (auto& t : tensors)
        if (t.name.starts_with(prefix)) part.push_back({t.name.substr(prefix.size()), t.shape, std::move(t.values)});
    return part;
}

common::Status check_moments(const common::NamedTensors& first, const common::NamedTensors& second,
                             std::size_t total) {
    if (first.empty() || first.size() + second.size() != total)
        return common::make_error("expected tensors named exp_avg/<parameter> and exp_avg_sq/<parameter> only");
    if (first.size() != second.size()) return common::make_error("exp_avg and exp_avg_sq name different parameters");
    for (std::size_t i = 0; i < first.size(); ++i) {
        if (first[i].name != second[i].name || first[i].shape != second[i].shape)
            return common::make_error("exp_avg/" + first[i].name + " has no exp_avg_sq of its shape");
        for (float v : first[i].values)
            if (!std::isfinite(v)) return common::make_error("exp_avg/" + first[i].name + " is not finite");
        for (float v : second[i].values)
            if (!std::isfinite(v) || v < 0)
                return common::make_error("exp_avg_sq/" + second[i].name + " is not finite and non-negative");
    }
    return {};
}

}  // namespace

common::Result<KeptOptimizerState> load_optimizer_state(const std::filesystem::path& file) {
    auto read = read_state_file(file, kFormat, kMaxOptimizerStateBytes + (std::uint64_t{1} << 24),
                                "an optimizer-state file");
    if (!read) return read.error();
    if (!*read) return KeptOptimizerState{};
    auto& tensors = (*read)->tensors;
    const auto& metadata = (*read)->metadata;
    KeptOptimizerState state{metadata_field(metadata, "task"), metadata_field(metadata, "model"), 0, {}, {}};
    const auto steps = metadata_field(metadata, "steps");
    auto [end, error] = std::from_chars(steps.data(), steps.data() + steps.size(), state.steps);
    if (error != std::errc() || end != steps.data() + steps.size() || state.steps < 1)
        return common::make_error(file.string() + ": metadata 'steps' must be a whole number above 0, got '" + steps +
                                  "'");
    const auto total = tensors.size();
    state.exp_avg = take_prefixed(tensors, kFirst);
    state.exp_avg_sq = take_prefixed(tensors, kSecond);
    if (auto status = check_moments(state.exp_avg, state.exp_avg_sq, total); !status)
        return common::with_context(file.string(), status.error());
    return state;
}

common::Status save_optimizer_state(const std::filesystem::path& file, const KeptOptimizerState& state) {
    if (state.empty()) {
        std::error_code ignored;
        std::filesystem::remove(file, ignored);
        return {};
    }
    common::NamedTensors tensors;
    append_prefixed(tensors, state.exp_avg, kFirst);
    append_prefixed(tensors, state.exp_avg_sq, kSecond);
    auto bytes = common::write_named_tensors(tensors, {{"format", std::string(kFormat)},
                                                       {"task", state.task_id},
                                                       {"model", state.model},
                                                       {"steps", std::to_string(state.steps)}});
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
