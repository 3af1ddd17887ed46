// Model patches: encode θ − θ̂, advance θ̂ by the decoded patch; apply the same way.
#include "model_patch.h"

#include "zstd_codec.h"

namespace tessera::common {
namespace {

Status same_layout(const NamedTensors& model, const NamedTensors& patch) {
    if (model.size() != patch.size())
        return make_error("the patch has " + std::to_string(patch.size()) + " tensors, the model " +
                          std::to_string(model.size()));
    for (std::size_t t = 0; t < model.size(); ++t) {
        if (model[t].name != patch[t].name)
            return make_error("the patch's tensor '" + patch[t].name + "' is not the model's '" + model[t].name + "'");
        if (model[t].shape != patch[t].shape || model[t].values.size() != patch[t].values.size())
            return make_error("the patch's tensor '" + patch[t].name + "' has another shape than the model's");
    }
    return {};
}

// One addition per value, the same on the server and on every volunteer.
void add_in_place(NamedTensors& model, const NamedTensors& patch) {
    for (std::size_t t = 0; t < model.size(); ++t) {
        auto& values = model[t].values;
        const auto& step = patch[t].values;
        for (std::size_t i = 0; i < values.size(); ++i) values[i] += step[i];
    }
}

Result<NamedTensors> decoded_for(const NamedTensors& model, ByteView patch) {
    std::uint64_t elements = 0;
    for (const auto& t : model) elements += t.values.size();
    auto decoded = decode_delta(patch, {elements + 1});
    if (!decoded) return with_context("model patch", decoded.error());
    if (auto status = same_layout(model, decoded->tensors); !status) return with_context("model patch", status.error());
    return std::move(decoded->tensors);
}

}  // namespace

Result<Bytes> make_patch(const NamedTensors& target, NamedTensors& published, const DeltaEncoding& encoding) {
    if (auto status = same_layout(published, target); !status) return status.error();
    NamedTensors difference = target;
    for (std::size_t t = 0; t < difference.size(); ++t) {
        auto& values = difference[t].values;
        const auto& base = published[t].values;
        for (std::size_t i = 0; i < values.size(); ++i) values[i] -= base[i];
    }
    auto encoded = encode_delta(difference, encoding);
    if (!encoded) return with_context("model patch", encoded.error());
    auto frame = zstd_compress(encoded->bytes);
    if (!frame) return frame.error();
    // Decoded from the bytes sent, as a volunteer decodes them.
    auto step = decoded_for(published, *frame);
    if (!step) return step.error();
    add_in_place(published, *step);
    return frame;
}

Status apply_patch(NamedTensors& model, ByteView patch) {
    auto step = decoded_for(model, patch);
    if (!step) return step.error();
    add_in_place(model, *step);
    return {};
}

}  // namespace tessera::common
