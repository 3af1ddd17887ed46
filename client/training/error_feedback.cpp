// The volunteer's error-feedback residual: its file, and the arithmetic around one encoding.
#include "error_feedback.h"

#include "file_io.h"
#include "named_tensor_file.h"

namespace tessera::client {
namespace {

constexpr std::string_view kFormat = "tessera.error_feedback";

}  // namespace

common::Result<ErrorFeedback> load_error_feedback(const std::filesystem::path& file) {
    std::error_code missing;
    if (!std::filesystem::exists(file, missing)) return ErrorFeedback{};
    auto bytes = common::read_file(file, std::uint64_t{16} << 30);
    if (!bytes) return bytes.error();
    auto read = common::read_named_tensors(*bytes);
    if (!read) return common::with_context(file.string(), read.error());
    auto field = [&](const char* key) {
        auto found = read->metadata.find(key);
        return found == read->metadata.end() ? std::string() : found->second;
    };
    if (field("format") != kFormat) return common::make_error(file.string() + ": not an error-feedback file");
    return ErrorFeedback{field("task"), field("model"), std::move(read->tensors)};
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
