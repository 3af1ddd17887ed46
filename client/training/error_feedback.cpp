// The volunteer's error-feedback residual: its file, and the arithmetic around one encoding.
#include "error_feedback.h"

#include <cmath>

#include "bytes.h"
#include "file_io.h"
#include "state_file.h"

namespace tessera::client {
namespace {

constexpr std::string_view kFormat = "tessera.error_feedback";

double norm_of(const common::NamedTensors& tensors) {
    double sum = 0.0;
    for (const auto& tensor : tensors)
        for (float value : tensor.values) sum += static_cast<double>(value) * value;
    return std::sqrt(sum);
}

}  // namespace

common::Result<ErrorFeedback> load_error_feedback(const std::filesystem::path& file) {
    auto read = read_state_file(file, kFormat, 16 * common::kGiB, "an error-feedback file");
    if (!read) return read.error();
    if (!*read) return ErrorFeedback{};
    const auto& metadata = (*read)->metadata;
    return ErrorFeedback{metadata_field(metadata, "task"), metadata_field(metadata, "model"),
                         std::move((*read)->tensors)};
}

common::Status save_error_feedback(const std::filesystem::path& file, const ErrorFeedback& feedback) {
    if (feedback.residual.empty()) {
        std::error_code ignored;
        std::filesystem::remove(file, ignored);
        return {};
    }
    auto bytes = common::write_named_tensors(
        feedback.residual, {{"format", std::string(kFormat)}, {"task", feedback.task_id}, {"model", feedback.model}});
    if (!bytes) return bytes.error();
    return common::write_file_atomic(file, *bytes);
}

bool lossless(const common::DeltaEncoding& encoding) {
    return encoding.dtype == common::DeltaDType::F32 && encoding.topk_fraction >= 1.0;
}

std::string feedback_mismatch(const ErrorFeedback& feedback, const common::WorkUnit& unit,
                              const common::NamedTensors& layout) {
    if (feedback.task_id != unit.task_id || feedback.model != unit.model)
        return "it belongs to task " + feedback.task_id + " (" + feedback.model + "), this unit to task " +
               unit.task_id + " (" + unit.model + ")";
    if (feedback.residual.size() != layout.size()) return "its tensors are not the model's";
    for (std::size_t t = 0; t < layout.size(); ++t)
        if (feedback.residual[t].name != layout[t].name || feedback.residual[t].shape != layout[t].shape ||
            feedback.residual[t].values.size() != layout[t].values.size())
            return "its tensor " + feedback.residual[t].name + " is not the model's";
    return {};
}

double clip_residual(common::NamedTensors& residual, const common::NamedTensors& delta) {
    double limit = kMaxResidualRatio * norm_of(delta);
    double norm = norm_of(residual);
    if (norm <= limit) return 1.0;
    double factor = limit / norm;
    for (auto& tensor : residual)
        for (float& value : tensor.values) value = static_cast<float>(value * factor);
    return factor;
}

common::Result<common::NamedTensors> residual_after(const common::NamedTensors& input, common::ByteView encoded) {
    auto decoded = common::decode_delta(encoded);
    if (!decoded) return decoded.error();
    auto residual = input;
    if (decoded->tensors.size() != residual.size()) return common::make_error("error feedback: tensor count differs");
    for (std::size_t t = 0; t < residual.size(); ++t) {
        const auto& back = decoded->tensors[t];
        if (back.name != residual[t].name || back.values.size() != residual[t].values.size())
            return common::make_error("error feedback: tensor " + back.name + " differs from the input");
        for (std::size_t i = 0; i < back.values.size(); ++i) residual[t].values[i] -= back.values[i];
    }
    return residual;
}

}  // namespace tessera::client
