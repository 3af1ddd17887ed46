// Norms, layout checks and scaling over NamedTensors.
#include "tensor_math.h"

#include <algorithm>
#include <cmath>

namespace tessera::server {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        if (i > 0) text += ",";
        text += std::to_string(shape[i]);
    }
    return text + "]";
}

bool has_tensor(const common::NamedTensors& tensors, const std::string& name) {
    return std::any_of(tensors.begin(), tensors.end(), [&](const auto& t) { return t.name == name; });
}

// The message for two tensors at the same position whose names differ.
common::Error name_mismatch(const common::NamedTensors& model, const common::NamedTensors& other, std::size_t i) {
    if (!has_tensor(model, other[i].name)) return common::make_error("unexpected tensor '" + other[i].name + "'");
    if (!has_tensor(other, model[i].name)) return common::make_error("missing tensor '" + model[i].name + "'");
    return common::make_error("tensor '" + other[i].name + "' is out of order: the model has '" + model[i].name +
                              "' at position " + std::to_string(i));
}

}  // namespace

double l2_norm(const common::NamedTensors& tensors) {
    // Four independent sums: one serial sum waits on each addition's latency.
    double sums[4] = {0, 0, 0, 0};
    for (const auto& t : tensors) {
        const float* v = t.values.data();
        const std::size_t n = t.values.size();
        std::size_t j = 0;
        for (; j + 4 <= n; j += 4)
            for (std::size_t k = 0; k < 4; ++k) sums[k] += static_cast<double>(v[j + k]) * v[j + k];
        for (; j < n; ++j) sums[0] += static_cast<double>(v[j]) * v[j];
    }
    return std::sqrt((sums[0] + sums[1]) + (sums[2] + sums[3]));
}

common::Result<double> relative_l2(const common::NamedTensors& a, const common::NamedTensors& b) {
    if (auto status = check_same_layout(a, b); !status) return status.error();
    double diff = 0;
    for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t j = 0; j < a[i].values.size(); ++j) {
            const double d = static_cast<double>(a[i].values[j]) - b[i].values[j];
            diff += d * d;
        }
    return std::sqrt(diff) / std::max({l2_norm(a), l2_norm(b), 1e-12});
}

common::Status check_same_layout(const common::NamedTensors& model, const common::NamedTensors& other) {
    const std::size_t common_count = std::min(model.size(), other.size());
    for (std::size_t i = 0; i < common_count; ++i) {
        const auto& m = model[i];
        const auto& o = other[i];
        if (m.name != o.name) return name_mismatch(model, other, i);
        if (m.shape != o.shape)
            return common::make_error("tensor '" + o.name + "': shape " + shape_text(o.shape) +
                                      " differs from the model's " + shape_text(m.shape));
        if (m.values.size() != o.values.size())
            return common::make_error("tensor '" + o.name + "': " + std::to_string(o.values.size()) +
                                      " values, the model has " + std::to_string(m.values.size()));
    }
    if (model.size() > common_count) return common::make_error("missing tensor '" + model[common_count].name + "'");
    if (other.size() > common_count) return common::make_error("unexpected tensor '" + other[common_count].name + "'");
    return {};
}

common::NamedTensors applied(const common::NamedTensors& base, const common::NamedTensors& delta) {
    auto sum = base;
    for (std::size_t i = 0; i < sum.size(); ++i)
        for (std::size_t j = 0; j < sum[i].values.size(); ++j) sum[i].values[j] += delta[i].values[j];
    return sum;
}

void scale_in_place(common::NamedTensors& tensors, double factor) {
    for (auto& t : tensors)
        for (float& v : t.values) v = static_cast<float>(v * factor);
}

double clip_norm_in_place(common::NamedTensors& delta, double max_norm) {
    if (max_norm <= 0) return 1.0;
    const double norm = l2_norm(delta);
    // A non-finite norm has no meaningful scale; the merge policies refuse such deltas.
    if (!std::isfinite(norm) || norm <= max_norm) return 1.0;
    const double factor = max_norm / norm;
    scale_in_place(delta, factor);
    return factor;
}

}  // namespace tessera::server
