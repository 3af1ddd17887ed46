// The safetensors reader. Every length, count and offset comes from untrusted bytes, so each
// is bounded and overflow-checked before use; nothing here asserts on file content.
#include <boost/json/value.hpp>

#include <algorithm>
#include <cstring>

#include "half.h"
#include "json_strict.h"
#include "safetensors.h"

namespace tessera::common {
namespace {

// Multiplies into `product`, failing instead of overflowing past `limit`.
bool checked_multiply(std::uint64_t& product, std::uint64_t factor, std::uint64_t limit) {
    if (factor != 0 && product > limit / factor) return false;
    product *= factor;
    return true;
}

Result<TensorView> parse_entry(const std::string& name, const boost::json::value& entry, ByteView data) {
    JsonObjectReader reader(entry, "tensor \"" + name + "\"");
    auto dtype_text = reader.string("dtype", 1, 8);
    const auto* shape_json = reader.field("shape");
    const auto* offsets_json = reader.field("data_offsets");
    if (auto status = reader.finish(); !status) return status.error();

    TensorView view;
    view.name = name;
    auto dtype = dtype_from_name(dtype_text);
    if (!dtype) return make_error(reader.path_of("dtype") + ": unsupported dtype \"" + dtype_text + "\"");
    view.dtype = *dtype;

    const auto* shape = shape_json->if_array();
    if (shape == nullptr) return make_error("tensor \"" + name + "\": shape is not an array");
    if (shape->size() > kMaxRank)
        return make_error("tensor \"" + name + "\": rank " + std::to_string(shape->size()) + " is above the limit of " +
                          std::to_string(kMaxRank));
    for (const auto& dim_json : *shape) {
        std::int64_t dim = 0;
        if (!json_to_integer(dim_json, 0, INT64_MAX, dim))
            return make_error("tensor \"" + name +
                              "\": shape holds something other than a "
                              "non-negative integer");
        view.shape.push_back(dim);
    }
    bool has_zero_dim = std::find(view.shape.begin(), view.shape.end(), 0) != view.shape.end();
    std::uint64_t bytes = has_zero_dim ? 0 : dtype_size(view.dtype);
    for (auto dim : view.shape)
        if (!checked_multiply(bytes, static_cast<std::uint64_t>(dim), data.size()))
            return make_error("tensor \"" + name + "\": shape describes more bytes than the file holds");

    const auto* offsets = offsets_json->if_array();
    std::int64_t begin = 0, end = 0;
    if (offsets == nullptr || offsets->size() != 2 || !json_to_integer((*offsets)[0], 0, INT64_MAX, begin) ||
        !json_to_integer((*offsets)[1], 0, INT64_MAX, end))
        return make_error("tensor \"" + name + "\": data_offsets must be [begin, end] integers");
    if (begin > end || static_cast<std::uint64_t>(end) > data.size())
        return make_error("tensor \"" + name + "\": data_offsets [" + std::to_string(begin) + ", " +
                          std::to_string(end) + "] lie outside the data section of " + std::to_string(data.size()) +
                          " bytes");
    if (static_cast<std::uint64_t>(end - begin) != bytes)
        return make_error("tensor \"" + name + "\": dtype and shape need " + std::to_string(bytes) +
                          " bytes but data_offsets give " + std::to_string(end - begin));
    view.data = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
    return view;
}

Status parse_metadata(const boost::json::value& value, TensorMetadata& out) {
    const auto* object = value.if_object();
    if (object == nullptr) return make_error("__metadata__ is not an object");
    for (const auto& entry : *object) {
        const auto* text = entry.value().if_string();
        if (text == nullptr)
            return make_error("__metadata__ value for \"" + std::string(entry.key()) + "\" is not a string");
        out.emplace(std::string(entry.key()), std::string(text->data(), text->size()));
    }
    return {};
}

}  // namespace

std::int64_t TensorView::numel() const {
    // A zero dimension first, so huge other dimensions cannot overflow the product.
    if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
    std::int64_t n = 1;
    for (auto dim : shape) n *= dim;
    return n;
}

const TensorView* TensorFile::find(std::string_view name) const {
    for (const auto& tensor : tensors_)
        if (tensor.name == name) return &tensor;
    return nullptr;
}

Result<TensorFile> parse_safetensors(ByteView buffer, const ReadLimits& limits) {
    if (buffer.size() < kHeaderLengthBytes)
        return make_error("safetensors: file of " + std::to_string(buffer.size()) +
                          " bytes is too short for the 8-byte header length");
    std::uint64_t header_length = 0;
    std::memcpy(&header_length, buffer.data(), kHeaderLengthBytes);
    if (header_length > limits.max_header_bytes)
        return make_error("safetensors: header length " + std::to_string(header_length) + " is above the limit of " +
                          std::to_string(limits.max_header_bytes));
    if (header_length > buffer.size() - kHeaderLengthBytes)
        return make_error("safetensors: header length " + std::to_string(header_length) + " runs past the end of the " +
                          std::to_string(buffer.size()) + "-byte file");
    auto header_text = as_string_view(buffer.subspan(kHeaderLengthBytes, header_length));
    auto data = buffer.subspan(kHeaderLengthBytes + header_length);

    JsonLimits json_limits;
    json_limits.max_bytes = limits.max_header_bytes;
    json_limits.max_depth = 4;
    auto header = parse_json_strict(header_text, json_limits);
    if (!header) return with_context("safetensors header", header.error());
    const auto* entries = header->if_object();
    if (entries == nullptr) return make_error("safetensors: header is not a JSON object");
    if (entries->size() > limits.max_tensors + 1)
        return make_error("safetensors: header lists " + std::to_string(entries->size()) +
                          " entries, above the limit of " + std::to_string(limits.max_tensors));

    TensorFile file;
    for (const auto& entry : *entries) {
        std::string name(entry.key().data(), entry.key().size());
        if (name == kMetadataKey) {
            if (auto status = parse_metadata(entry.value(), file.metadata_); !status)
                return with_context("safetensors", status.error());
            continue;
        }
        if (name.empty() || name.size() > kMaxTensorNameBytes)
            return make_error("safetensors: tensor name of " + std::to_string(name.size()) + " bytes (allowed: 1 to " +
                              std::to_string(kMaxTensorNameBytes) + ")");
        auto view = parse_entry(name, entry.value(), data);
        if (!view) return with_context("safetensors", view.error());
        file.tensors_.push_back(std::move(view).value());
    }

    // The tensors must tile the data section: sorted by offset, each starts where the last ended.
    std::sort(file.tensors_.begin(), file.tensors_.end(), [&](const auto& a, const auto& b) {
        return a.data.data() != b.data.data() ? a.data.data() < b.data.data() : a.data.size() < b.data.size();
    });
    std::size_t expected = 0;
    for (const auto& tensor : file.tensors_) {
        auto begin = static_cast<std::size_t>(tensor.data.data() - data.data());
        if (begin != expected)
            return make_error("safetensors: tensor \"" + tensor.name + "\" starts at data offset " +
                              std::to_string(begin) + " but the previous tensor ends at " + std::to_string(expected) +
                              " (overlap or gap)");
        expected = begin + tensor.data.size();
    }
    if (expected != data.size())
        return make_error("safetensors: " + std::to_string(data.size() - expected) +
                          " bytes after the last tensor belong to no tensor");
    return file;
}

Result<std::vector<float>> read_as_f32(const TensorView& view) {
    std::vector<float> out(static_cast<std::size_t>(view.numel()));
    const std::uint8_t* src = view.data.data();
    switch (view.dtype) {
        case DType::F32:
            if (!out.empty()) std::memcpy(out.data(), src, out.size() * 4);
            return out;
        case DType::F16:
        case DType::BF16:
            for (std::size_t i = 0; i < out.size(); ++i) {
                std::uint16_t half = 0;
                std::memcpy(&half, src + 2 * i, 2);
                out[i] = view.dtype == DType::F16 ? f16_to_f32(half) : bf16_to_f32(half);
            }
            return out;
        default:
            return make_error("tensor \"" + view.name + "\" has dtype " + std::string(dtype_name(view.dtype)) +
                              ", expected a float dtype");
    }
}

}  // namespace tessera::common
