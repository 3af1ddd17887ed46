#include "delta_probe.h"

#include <algorithm>
#include <cmath>

#include "result_checks.h"

namespace tessera::bench {
namespace {

// "blocks.3.qkv.weight" → "blocks.3"; "t_fc1.bias" → "t_fc1".
std::string module_of(const std::string& name) {
    auto first = name.find('.');
    if (first == std::string::npos) return name;
    if (name.compare(0, first, "blocks") == 0) {
        auto second = name.find('.', first + 1);
        return name.substr(0, second);
    }
    return name.substr(0, first);
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
    double total = 0;
    for (std::size_t i = 0; i < a.size(); ++i) total += static_cast<double>(a[i]) * b[i];
    return total;
}

}  // namespace

std::vector<GroupSlice> group_slices(const common::NamedTensor& tensor) {
    const auto size = tensor.values.size();
    // The class embedding's rows: one per class, then the null class guidance samples without.
    if (tensor.name == "class_embed.weight" && tensor.shape.size() == 2 && tensor.shape[0] >= 2) {
        auto null_begin = size - static_cast<std::size_t>(tensor.shape[1]);
        return {{"class_embed.classes", 0, null_begin}, {"class_embed.null", null_begin, size}};
    }
    return {{module_of(tensor.name), 0, size}};
}

DeltaProbe::DeltaProbe(std::size_t window) : window_(std::max<std::size_t>(1, window)) {}

void DeltaProbe::record(const common::NamedTensors& delta, std::int64_t base_version, std::int64_t local_steps) {
    GroupVectors groups;
    for (const auto& tensor : delta)
        for (const auto& slice : group_slices(tensor)) {
            auto& values = groups[slice.group];
            values.insert(values.end(), tensor.values.begin() + static_cast<std::ptrdiff_t>(slice.begin),
                          tensor.values.begin() + static_cast<std::ptrdiff_t>(slice.end));
        }
    double total = 0;
    for (const auto& [group, values] : groups) total += dot(values, values);

    ProbedDelta probed{base_version, local_steps, {}};
    for (const auto& [group, values] : groups) {
        ModuleProbe module{group, total > 0 ? dot(values, values) / total : 0, std::nullopt};
        std::vector<float> recent_sum;
        for (const auto& earlier : recent_) {
            auto found = earlier.find(group);
            if (found == earlier.end() || found->second.size() != values.size()) continue;
            if (recent_sum.empty()) recent_sum.assign(values.size(), 0.0f);
            for (std::size_t i = 0; i < values.size(); ++i) recent_sum[i] += found->second[i];
        }
        if (!recent_sum.empty()) {
            double norms = std::sqrt(dot(values, values) * dot(recent_sum, recent_sum));
            if (norms > 0) module.alignment = dot(values, recent_sum) / norms;
        }
        probed.modules.push_back(std::move(module));
    }
    deltas_.push_back(std::move(probed));
    recent_.push_back(std::move(groups));
    if (recent_.size() > window_) recent_.pop_front();
}

std::vector<GroupSummary> summarize_probes(const std::vector<ProbedDelta>& deltas) {
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> by_group;
    for (const auto& delta : deltas)
        for (const auto& module : delta.modules) {
            auto& [shares, alignments] = by_group[module.group];
            shares.push_back(module.share);
            if (module.alignment) alignments.push_back(*module.alignment);
        }
    std::vector<GroupSummary> rows;
    for (auto& [group, values] : by_group) {
        auto& [shares, alignments] = values;
        GroupSummary row{group, server::median_of(shares), std::nullopt, shares.size()};
        if (!alignments.empty()) row.median_alignment = server::median_of(alignments);
        rows.push_back(std::move(row));
    }
    return rows;
}

}  // namespace tessera::bench
