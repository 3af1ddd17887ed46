// Delta decoder for untrusted bytes: unwraps a zstd frame (with a cap), checks the metadata,
// groups parts by tensor, and checks every count, index and scale before it expands anything.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "delta_codec.h"
#include "half.h"
#include "index_gaps.h"
#include "int8_blockwise.h"
#include "lowbit_blockwise.h"
#include "safetensors.h"
#include "zstd_codec.h"

namespace tessera::common {
namespace {

// The parts found in the file for one tensor name.
struct TensorParts {
    const TensorView* dense = nullptr;
    const TensorView* scale = nullptr;
    const TensorView* index = nullptr;
    const TensorView* value = nullptr;
    const TensorView* shape = nullptr;
};

template <class T>
T load(const std::uint8_t* src, std::size_t i) {
    T value;
    std::memcpy(&value, src + i * sizeof(T), sizeof(T));
    return value;
}

DType stored_dtype(DeltaDType dtype) {
    switch (dtype) {
        case DeltaDType::F32: return DType::F32;
        case DeltaDType::BF16: return DType::BF16;
        case DeltaDType::Int8: return DType::I8;
        case DeltaDType::Int4:
        case DeltaDType::Int2: return DType::U8;
    }
    return DType::F32;
}

Result<DeltaEncoding> read_encoding(const TensorMetadata& metadata) {
    auto get = [&](const char* key) -> std::string {
        auto found = metadata.find(key);
        return found == metadata.end() ? std::string() : found->second;
    };
    if (get("format") != "tessera.delta" || get("version") != "1")
        return make_error("delta: not a tessera.delta version 1 file (metadata format/version)");
    DeltaEncoding encoding;
    auto dtype = delta_dtype_from_name(get("dtype"));
    if (!dtype) return make_error("delta: unknown dtype \"" + get("dtype") + "\" in metadata");
    encoding.dtype = *dtype;
    if (get("block_size") != std::to_string(kInt8BlockSize))
        return make_error("delta: block_size must be " + std::to_string(kInt8BlockSize));
    char* end = nullptr;
    auto fraction_text = get("topk_fraction");
    encoding.topk_fraction = std::strtod(fraction_text.c_str(), &end);
    if (fraction_text.empty() || *end != '\0' || !(encoding.topk_fraction > 0.0) || encoding.topk_fraction > 1.0)
        return make_error("delta: topk_fraction \"" + fraction_text + "\" is not in (0, 1]");
    return encoding;
}

Result<std::map<std::string, TensorParts>> group_parts(const TensorFile& file) {
    std::map<std::string, TensorParts> groups;
    for (const auto& view : file.tensors()) {
        auto cut = view.name.find('#');
        std::string base = view.name.substr(0, cut);
        std::string suffix = cut == std::string::npos ? "" : view.name.substr(cut + 1);
        auto& parts = groups[base];
        if (suffix.empty())
            parts.dense = &view;
        else if (suffix == "scale")
            parts.scale = &view;
        else if (suffix == "index")
            parts.index = &view;
        else if (suffix == "value")
            parts.value = &view;
        else if (suffix == "shape")
            parts.shape = &view;
        else
            return make_error("delta: tensor \"" + view.name + "\" has an unknown part suffix");
        if (base.empty()) return make_error("delta: tensor \"" + view.name + "\" has an empty name");
    }
    return groups;
}

// The block scales of an integer tensor of `count` values, checked.
Result<std::vector<float>> read_scales(const std::string& name, const TensorView* scale, std::size_t count) {
    if (scale == nullptr) return make_error("delta: integer tensor \"" + name + "\" has no #scale part");
    if (scale->dtype != DType::F32 || scale->shape.size() != 1 ||
        static_cast<std::size_t>(scale->numel()) != int8_block_count(count))
        return make_error("delta: tensor \"" + name + "\" needs " + std::to_string(int8_block_count(count)) +
                          " f32 block scales");
    std::vector<float> scales(int8_block_count(count));
    for (std::size_t i = 0; i < scales.size(); ++i) {
        scales[i] = load<float>(scale->data.data(), i);
        if (!std::isfinite(scales[i]) || scales[i] < 0.0f)
            return make_error("delta: tensor \"" + name + "\" has a negative or non-finite scale");
    }
    return scales;
}

// Expands `count` stored values (f32, bf16, int8 or packed int4 / int2 with block scales) to f32,
// adding their quantisation steps squared to `step_power`.
Result<std::vector<float>> expand_values(const std::string& name, const TensorView& values, const TensorView* scale,
                                         DeltaDType dtype, std::size_t count, double& step_power) {
    if (values.dtype != stored_dtype(dtype) || (values.shape.size() > 1 && packed_bits(dtype) > 0))
        return make_error("delta: tensor \"" + name + "\" is stored as " + std::string(dtype_name(values.dtype)) +
                          " but the file says " + std::string(delta_dtype_name(dtype)));
    if (dtype == DeltaDType::F32 || dtype == DeltaDType::BF16) {
        if (scale != nullptr) return make_error("delta: tensor \"" + name + "\" has scales but is not an integer dtype");
        return read_as_f32(values);
    }
    auto scales = read_scales(name, scale, count);
    if (!scales) return scales.error();
    for (std::size_t block = 0; block < scales->size(); ++block) {
        auto in_block = std::min(kInt8BlockSize, count - block * kInt8BlockSize);
        step_power += static_cast<double>(in_block) * (*scales)[block] * (*scales)[block];
    }
    if (dtype == DeltaDType::Int8) {
        std::vector<std::int8_t> q(count);
        if (count > 0) std::memcpy(q.data(), values.data.data(), count);
        std::vector<float> out(count);
        dequantize_int8_blockwise(q, *scales, out);
        return out;
    }
    auto out = dequantize_packed_blockwise(values.data, *scales, count, packed_bits(dtype));
    if (!out) return with_context("delta: tensor \"" + name + "\"", out.error());
    return out;
}

// The shape a #shape part states, within the element budget.
Result<std::vector<std::int64_t>> read_shape(const std::string& name, const TensorView& shape_view,
                                             std::uint64_t element_budget, std::uint64_t& numel) {
    if (shape_view.dtype != DType::I64 || shape_view.shape.size() != 1 ||
        shape_view.numel() > static_cast<std::int64_t>(kMaxRank))
        return make_error("delta: tensor \"" + name +
                          "\" #shape must be an I64 vector of rank <= " + std::to_string(kMaxRank));
    std::vector<std::int64_t> shape;
    numel = 1;
    for (std::int64_t i = 0; i < shape_view.numel(); ++i) {
        auto dim = load<std::int64_t>(shape_view.data.data(), static_cast<std::size_t>(i));
        if (dim < 0 || (dim > 0 && numel > element_budget / static_cast<std::uint64_t>(dim)))
            return make_error("delta: tensor \"" + name + "\" #shape is negative or exceeds the element limit");
        numel *= static_cast<std::uint64_t>(dim);
        shape.push_back(dim);
    }
    return shape;
}

Result<NamedTensor> decode_dense(const std::string& name, const TensorParts& parts, DeltaDType dtype,
                                 double& step_power) {
    if (parts.index || parts.value || parts.shape)
        return make_error("delta: tensor \"" + name + "\" mixes dense and sparse parts");
    if (packed_bits(dtype) > 0)
        return make_error("delta: " + std::string(delta_dtype_name(dtype)) + " tensor \"" + name +
                          "\" must be stored as #value and #shape parts");
    auto values = expand_values(name, *parts.dense, parts.scale, dtype, static_cast<std::size_t>(parts.dense->numel()),
                                step_power);
    if (!values) return values.error();
    return NamedTensor{name, parts.dense->shape, std::move(values).value()};
}

// Packed int4 / int2 values of a whole tensor, in the order of its #shape.
Result<NamedTensor> decode_packed_dense(const std::string& name, const TensorParts& parts, DeltaDType dtype,
                                        std::uint64_t element_budget, double& step_power) {
    if (packed_bits(dtype) == 0 || !parts.value || !parts.shape)
        return make_error("delta: sparse tensor \"" + name + "\" needs #index, #value and #shape parts");
    std::uint64_t numel = 0;
    auto shape = read_shape(name, *parts.shape, element_budget, numel);
    if (!shape) return shape.error();
    auto values = expand_values(name, *parts.value, parts.scale, dtype, static_cast<std::size_t>(numel), step_power);
    if (!values) return values.error();
    return NamedTensor{name, std::move(shape).value(), std::move(values).value()};
}

// The flat indices a #index part holds: I32 indices, or U8 gaps (common/index_gaps.h).
Result<std::vector<std::int32_t>> read_indices(const std::string& name, const TensorView& index, std::uint64_t numel) {
    if (index.shape.size() != 1 || (index.dtype != DType::I32 && index.dtype != DType::U8))
        return make_error("delta: tensor \"" + name + "\" #index must be an I32 or U8 (gaps) vector");
    if (index.dtype == DType::U8) {
        auto indices = decode_index_gaps(index.data, numel);
        if (!indices) return with_context("delta: tensor \"" + name + "\"", indices.error());
        return indices;
    }
    std::vector<std::int32_t> indices(static_cast<std::size_t>(index.numel()));
    std::int64_t previous = -1;
    for (std::size_t i = 0; i < indices.size(); ++i) {
        std::int64_t at = load<std::int32_t>(index.data.data(), i);
        if (at <= previous || static_cast<std::uint64_t>(at) >= numel)
            return make_error("delta: tensor \"" + name + "\" #index is not strictly increasing within the shape");
        indices[i] = static_cast<std::int32_t>(at);
        previous = at;
    }
    return indices;
}

Result<NamedTensor> decode_sparse(const std::string& name, const TensorParts& parts, DeltaDType dtype,
                                  std::uint64_t element_budget, double& step_power) {
    if (!parts.index || !parts.value || !parts.shape)
        return make_error("delta: sparse tensor \"" + name + "\" needs #index, #value and #shape parts");
    std::uint64_t numel = 0;
    auto shape = read_shape(name, *parts.shape, element_budget, numel);
    if (!shape) return shape.error();
    auto indices = read_indices(name, *parts.index, numel);
    if (!indices) return indices.error();
    if (parts.value->shape.size() != 1 ||
        (packed_bits(dtype) == 0 && static_cast<std::size_t>(parts.value->numel()) != indices->size()))
        return make_error("delta: tensor \"" + name + "\" #index must have one entry per #value");
    auto values = expand_values(name, *parts.value, parts.scale, dtype, indices->size(), step_power);
    if (!values) return values.error();
    NamedTensor out{name, std::move(shape).value(), std::vector<float>(numel, 0.0f)};
    for (std::size_t i = 0; i < indices->size(); ++i) out.values[static_cast<std::size_t>((*indices)[i])] = (*values)[i];
    return out;
}

}  // namespace

Result<DecodedDelta> decode_delta(ByteView bytes, const DeltaDecodeLimits& limits) {
    if (is_zstd_frame(bytes)) {
        // The largest honest file: 8 bytes a value (sparse f32 with I32 indices) and its header.
        auto cap = 8 * limits.max_elements + (std::uint64_t{17} << 20);
        auto inflated = zstd_decompress(bytes, cap);
        if (!inflated) return with_context("delta", inflated.error());
        if (is_zstd_frame(*inflated)) return make_error("delta: a zstd frame inside a zstd frame");
        return decode_delta(*inflated, limits);
    }
    auto file = parse_safetensors(bytes);
    if (!file) return with_context("delta", file.error());
    auto encoding = read_encoding(file->metadata());
    if (!encoding) return encoding.error();
    auto groups = group_parts(*file);
    if (!groups) return groups.error();

    DecodedDelta out;
    out.encoding = *encoding;
    std::uint64_t elements = 0;
    for (const auto& [name, parts] : *groups) {
        std::uint64_t budget = limits.max_elements - elements;
        auto& power = out.step_power;
        Result<NamedTensor> tensor = parts.dense  ? decode_dense(name, parts, encoding->dtype, power)
                                     : parts.index ? decode_sparse(name, parts, encoding->dtype, budget, power)
                                                   : decode_packed_dense(name, parts, encoding->dtype, budget, power);
        if (!tensor) return tensor.error();
        elements += tensor->values.size();
        if (elements > limits.max_elements)
            return make_error("delta: more than the limit of " + std::to_string(limits.max_elements) + " elements");
        out.tensors.push_back(std::move(tensor).value());
    }
    return out;
}

}  // namespace tessera::common
