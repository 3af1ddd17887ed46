// The optimizer moments file (optimizer_moments.h).
#include "optimizer_moments.h"

#include <charconv>
#include <cmath>

#include "named_tensor_file.h"

namespace tessera::common {
namespace {

constexpr std::string_view kFirst = "exp_avg/";
constexpr std::string_view kSecond = "exp_avg_sq/";

void append_prefixed(NamedTensors& out, const NamedTensors& tensors, std::string_view prefix) {
    for (const auto& t : tensors) out.push_back({std::string(prefix) + t.name, t.shape, t.values});
}

// The moments of one prefix, the prefix taken off, in the file's (sorted) order.
NamedTensors take_prefixed(NamedTensors& tensors, std::string_view prefix) {
    NamedTensors part;
    for (auto& t : tensors)
        if (t.name.starts_with(prefix)) part.push_back({t.name.substr(prefix.size()), t.shape, std::move(t.values)});
    return part;
}

Status check_moments(const NamedTensors& first, const NamedTensors& second, std::size_t total) {
    if (first.empty() || first.size() + second.size() != total)
        return make_error("expected tensors named exp_avg/<parameter> and exp_avg_sq/<parameter> only");
    if (first.size() != second.size()) return make_error("exp_avg and exp_avg_sq name different parameters");
    for (std::size_t i = 0; i < first.size(); ++i) {
        if (first[i].name != second[i].name || first[i].shape != second[i].shape)
            return make_error("exp_avg/" + first[i].name + " has no exp_avg_sq of its shape");
        for (float v : first[i].values)
            if (!std::isfinite(v)) return make_error("exp_avg/" + first[i].name + " is not finite");
        for (float v : second[i].values)
            if (!std::isfinite(v) || v < 0)
                return make_error("exp_avg_sq/" + second[i].name + " is not finite and non-negative");
    }
    return {};
}

std::string field(const TensorMetadata& metadata, const std::string& key) {
    auto found = metadata.find(key);
    return found == metadata.end() ? std::string() : found->second;
}

}  // namespace

Result<Bytes> write_optimizer_moments(const OptimizerMoments& moments, TensorMetadata metadata) {
    NamedTensors tensors;
    append_prefixed(tensors, moments.exp_avg, kFirst);
    append_prefixed(tensors, moments.exp_avg_sq, kSecond);
    metadata["format"] = std::string(kOptimizerStateFormat);
    metadata["steps"] = std::to_string(moments.steps);
    return write_named_tensors(tensors, metadata);
}

Result<OptimizerMomentsFile> read_optimizer_moments(ByteView bytes) {
    auto read = read_named_tensors(bytes);
    if (!read) return read.error();
    if (field(read->metadata, "format") != kOptimizerStateFormat)
        return make_error("not an optimizer-state file (format '" + field(read->metadata, "format") + "')");
    OptimizerMomentsFile file;
    file.metadata = std::move(read->metadata);
    const auto steps = field(file.metadata, "steps");
    auto [end, error] = std::from_chars(steps.data(), steps.data() + steps.size(), file.moments.steps);
    if (error != std::errc() || end != steps.data() + steps.size() || file.moments.steps < 1)
        return make_error("metadata 'steps' must be a whole number above 0, got '" + steps + "'");
    auto& tensors = read->tensors;
    const auto total = tensors.size();
    file.moments.exp_avg = take_prefixed(tensors, kFirst);
    file.moments.exp_avg_sq = take_prefixed(tensors, kSecond);
    if (auto status = check_moments(file.moments.exp_avg, file.moments.exp_avg_sq, total); !status)
        return status.error();
    return file;
}

}  // namespace tessera::common
