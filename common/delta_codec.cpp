// Delta encoder. Parts of tensor NAME in the file: NAME (dense f32, bf16, int8 values),
// NAME#scale (block scales of the integer dtypes), NAME#value and NAME#shape (sparse values,
// and packed int4 / int2 values, dense or not), NAME#index (sparse: index gaps).
#include "delta_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>

#include "half.h"
#include "index_gaps.h"
#include "int8_blockwise.h"
#include "lowbit_blockwise.h"
#include "safetensors.h"

namespace tessera::common {
namespace {

constexpr std::string_view kFormatName = "tessera.delta";
constexpr std::string_view kFormatVersion = "1";

// Byte storage for the parts of one encoded tensor; views into it go to the writer.
struct EncodedParts {
    std::vector<std::string> names;
    std::vector<DType> dtypes;
    std::vector<std::vector<std::int64_t>> shapes;
    std::vector<Bytes> data;

    template <class T>
    void add(std::string name, DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
        Bytes bytes(values.size() * sizeof(T));
        if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
        names.push_back(std::move(name));
        dtypes.push_back(dtype);
        shapes.push_back(std::move(shape));
        data.push_back(std::move(bytes));
    }
};

// Encodes `values` in the chosen dtype as part NAME (or NAME#value, which packed low-bit
// values always use) and returns what decoding will give back.
std::vector<float> encode_values(const std::string& part, const std::string& base, std::vector<std::int64_t> shape,
                                 const std::vector<float>& values, DeltaDType dtype, EncodedParts& parts) {
    std::vector<float> decoded(values.size());
    auto add_scales = [&](const std::vector<float>& scales) {
        parts.add(base + "#scale", DType::F32, {static_cast<std::int64_t>(scales.size())}, scales);
    };
    switch (dtype) {
        case DeltaDType::F32:
            parts.add(part, DType::F32, std::move(shape), values);
            decoded = values;
            break;
        case DeltaDType::BF16: {
            std::vector<std::uint16_t> halves(values.size());
            for (std::size_t i = 0; i < values.size(); ++i) {
                halves[i] = f32_to_bf16(values[i]);
                decoded[i] = bf16_to_f32(halves[i]);
            }
            parts.add(part, DType::BF16, std::move(shape), halves);
            break;
        }
        case DeltaDType::Int8: {
            std::vector<std::int8_t> q(values.size());
            std::vector<float> scales(int8_block_count(values.size()));
            quantize_int8_blockwise(values, q, scales);
            dequantize_int8_blockwise(q, scales, decoded);
            parts.add(part, DType::I8, std::move(shape), q);
            add_scales(scales);
            break;
        }
        case DeltaDType::Int4:
        case DeltaDType::Int2: {
            auto packed = quantize_packed_blockwise(values, packed_bits(dtype));
            decoded = dequantize_packed_blockwise(packed.packed, packed.scales, values.size(), packed_bits(dtype)).value();
            parts.add(base + "#value", DType::U8, {static_cast<std::int64_t>(packed.packed.size())}, packed.packed);
            add_scales(packed.scales);
            if (part == base) parts.add(base + "#shape", DType::I64, {static_cast<std::int64_t>(shape.size())}, shape);
            break;
        }
    }
    return decoded;
}

// The flat indices of the k largest magnitudes, ascending.
std::vector<std::int32_t> top_k_indices(const std::vector<float>& values, std::size_t k) {
    std::vector<std::int32_t> order(values.size());
    std::iota(order.begin(), order.end(), 0);
    auto larger = [&](std::int32_t a, std::int32_t b) {
        float ma = std::fabs(values[a]), mb = std::fabs(values[b]);
        return ma != mb ? ma > mb : a < b;
    };
    std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), larger);
    order.resize(k);
    std::sort(order.begin(), order.end());
    return order;
}

// The checks the encoder and the writer of encoded tensors share; `who` starts each message.
Status check_fraction(const DeltaEncoding& encoding, std::string_view who) {
    if (encoding.topk_fraction > 0.0 && encoding.topk_fraction <= 1.0) return {};
    return make_error(std::string(who) + ": top-k fraction must be in (0, 1]");
}

bool valid_tensor_name(const std::string& name) {
    return !name.empty() && name.find(kDeltaPartSeparator) == std::string::npos;
}

Status check_unique(std::vector<std::string_view> names, std::string_view who) {
    std::sort(names.begin(), names.end());
    if (std::adjacent_find(names.begin(), names.end()) != names.end())
        return make_error(std::string(who) + ": duplicate tensor name");
    return {};
}

Status check_encodable(const NamedTensors& delta, const DeltaEncoding& encoding) {
    if (auto status = check_fraction(encoding, "delta encoder"); !status) return status;
    std::vector<std::string_view> names;
    for (const auto& t : delta) {
        if (!valid_tensor_name(t.name))
            return make_error("delta encoder: tensor name \"" + t.name + "\" is empty or contains '#'");
        std::int64_t numel = 1;
        for (auto dim : t.shape) numel *= dim;
        if (numel != static_cast<std::int64_t>(t.values.size()))
            return make_error("delta encoder: tensor \"" + t.name + "\" shape does not match its values");
        if (t.values.size() > static_cast<std::size_t>(INT32_MAX))
            return make_error("delta encoder: tensor \"" + t.name + "\" is too large");
        for (float v : t.values)
            if (!std::isfinite(v))
                return make_error("delta encoder: tensor \"" + t.name + "\" holds a non-finite value");
        names.push_back(t.name);
    }
    return check_unique(std::move(names), "delta encoder");
}

std::string format_fraction(double fraction) {
    char text[32];
    std::snprintf(text, sizeof text, "%.9g", fraction);
    return text;
}

}  // namespace

std::string_view delta_dtype_name(DeltaDType dtype) {
    switch (dtype) {
        case DeltaDType::F32: return "f32";
        case DeltaDType::BF16: return "bf16";
        case DeltaDType::Int8: return "int8";
        case DeltaDType::Int4: return "int4";
        case DeltaDType::Int2: return "int2";
    }
    return "?";
}

std::optional<DeltaDType> delta_dtype_from_name(std::string_view name) {
    for (auto dtype : {DeltaDType::F32, DeltaDType::BF16, DeltaDType::Int8, DeltaDType::Int4, DeltaDType::Int2})
        if (delta_dtype_name(dtype) == name) return dtype;
    return std::nullopt;
}

int packed_bits(DeltaDType dtype) {
    return dtype == DeltaDType::Int4 ? 4 : dtype == DeltaDType::Int2 ? 2 : 0;
}

namespace {

Result<Bytes> write_parts(const EncodedParts& parts, const DeltaEncoding& encoding) {
    std::vector<TensorView> views;
    for (std::size_t i = 0; i < parts.names.size(); ++i)
        views.push_back({parts.names[i], parts.dtypes[i], parts.shapes[i], parts.data[i]});
    TensorMetadata metadata{{"format", std::string(kFormatName)},
                            {"version", std::string(kFormatVersion)},
                            {"dtype", std::string(delta_dtype_name(encoding.dtype))},
                            {"block_size", std::to_string(kInt8BlockSize)},
                            {"topk_fraction", format_fraction(encoding.topk_fraction)}};
    return write_safetensors(views, metadata);
}

// Bytes that `count` values take in the dtype.
std::size_t value_bytes(DeltaDType dtype, std::size_t count) {
    switch (dtype) {
        case DeltaDType::F32: return 4 * count;
        case DeltaDType::BF16: return 2 * count;
        case DeltaDType::Int8: return count;
        case DeltaDType::Int4:
        case DeltaDType::Int2: return packed_byte_count(count, packed_bits(dtype));
    }
    return 0;
}

// The checks encode_delta makes on its input, made on encoded values.
Status check_encoded(const EncodedTensor& t, const DeltaEncoding& encoding) {
    auto fail = [&](const std::string& what) { return make_error("delta writer: tensor \"" + t.name + "\" " + what); };
    if (!valid_tensor_name(t.name)) return fail("has an empty name or one with '#'");
    std::int64_t numel = 1;
    for (auto dim : t.shape) {
        if (dim < 0 || dim > INT32_MAX) return fail("has a bad shape");
        numel *= dim;
        if (numel > INT32_MAX) return fail("is too large");
    }
    bool dense = encoding.topk_fraction >= 1.0;
    if (dense != t.indices.empty() && numel > 0) return fail(dense ? "has indices in a dense delta" : "has no indices");
    auto count = dense ? static_cast<std::size_t>(numel) : t.indices.size();
    if (t.values.size() != value_bytes(encoding.dtype, count)) return fail("has the wrong number of value bytes");
    for (std::size_t i = 0; i < t.indices.size(); ++i)
        if (t.indices[i] < 0 || t.indices[i] >= numel || (i > 0 && t.indices[i] <= t.indices[i - 1]))
            return fail("has indices out of order or out of range");
    if (packed_bits(encoding.dtype) > 0) {
        auto decoded = dequantize_packed_blockwise(t.values, t.scales, count, packed_bits(encoding.dtype));
        if (!decoded) return fail(decoded.message());
    } else if (encoding.dtype == DeltaDType::Int8) {
        if (t.scales.size() != int8_block_count(count)) return fail("has the wrong number of scales");
        for (float scale : t.scales)
            if (!std::isfinite(scale)) return fail("has a non-finite scale");
    } else {
        for (std::size_t i = 0; i < count; ++i) {
            float value;
            if (encoding.dtype == DeltaDType::F32) {
                std::memcpy(&value, t.values.data() + 4 * i, 4);
            } else {
                std::uint16_t bits;
                std::memcpy(&bits, t.values.data() + 2 * i, 2);
                value = bf16_to_f32(bits);
            }
            if (!std::isfinite(value)) return fail("holds a non-finite value");
        }
    }
    return {};
}

}  // namespace

Result<Bytes> write_encoded_delta(const std::vector<EncodedTensor>& tensors, const DeltaEncoding& encoding) {
    if (auto status = check_fraction(encoding, "delta writer"); !status) return status.error();
    std::vector<std::string_view> names;
    EncodedParts parts;
    bool dense = encoding.topk_fraction >= 1.0;
    for (const auto& t : tensors) {
        if (auto status = check_encoded(t, encoding); !status) return status.error();
        names.push_back(t.name);
        auto shape_part = [&] {
            parts.add(t.name + "#shape", DType::I64, {static_cast<std::int64_t>(t.shape.size())}, t.shape);
        };
        auto scale_part = [&] {
            parts.add(t.name + "#scale", DType::F32, {static_cast<std::int64_t>(t.scales.size())}, t.scales);
        };
        auto value_part = dense ? t.name : t.name + "#value";
        auto value_shape =
            dense ? t.shape : std::vector<std::int64_t>{static_cast<std::int64_t>(t.indices.size())};
        switch (encoding.dtype) {
            case DeltaDType::F32: parts.add(value_part, DType::F32, value_shape, t.values); break;
            case DeltaDType::BF16: parts.add(value_part, DType::BF16, value_shape, t.values); break;
            case DeltaDType::Int8:
                parts.add(value_part, DType::I8, value_shape, t.values);
                scale_part();
                break;
            case DeltaDType::Int4:
            case DeltaDType::Int2:
                parts.add(t.name + "#value", DType::U8, {static_cast<std::int64_t>(t.values.size())}, t.values);
                scale_part();
                if (dense) shape_part();
                break;
        }
        if (!dense) {
            auto gaps = encode_index_gaps(t.indices);
            parts.add(t.name + "#index", DType::U8, {static_cast<std::int64_t>(gaps.size())}, gaps);
            shape_part();
        }
    }
    if (auto status = check_unique(std::move(names), "delta writer"); !status) return status.error();
    return write_parts(parts, encoding);
}

Result<EncodedDelta> encode_delta(const NamedTensors& delta, const DeltaEncoding& encoding) {
    if (auto status = check_encodable(delta, encoding); !status) return status.error();
    EncodedParts parts;
    EncodedDelta out;
    bool dense = encoding.topk_fraction >= 1.0;
    for (const auto& t : delta) {
        NamedTensor residual{t.name, t.shape, t.values};
        if (dense) {
            auto decoded = encode_values(t.name, t.name, t.shape, t.values, encoding.dtype, parts);
            for (std::size_t i = 0; i < decoded.size(); ++i) residual.values[i] -= decoded[i];
        } else {
            std::size_t n = t.values.size();
            auto k = std::min(n, static_cast<std::size_t>(std::ceil(encoding.topk_fraction * static_cast<double>(n))));
            auto indices = top_k_indices(t.values, k);
            std::vector<float> kept(k);
            for (std::size_t i = 0; i < k; ++i) kept[i] = t.values[indices[i]];
            auto decoded =
                encode_values(t.name + "#value", t.name, {static_cast<std::int64_t>(k)}, kept, encoding.dtype, parts);
            for (std::size_t i = 0; i < k; ++i) residual.values[indices[i]] -= decoded[i];
            auto gaps = encode_index_gaps(indices);
            parts.add(t.name + "#index", DType::U8, {static_cast<std::int64_t>(gaps.size())}, gaps);
            parts.add(t.name + "#shape", DType::I64, {static_cast<std::int64_t>(t.shape.size())}, t.shape);
        }
        out.residual.push_back(std::move(residual));
    }
    auto bytes = write_parts(parts, encoding);
    if (!bytes) return bytes.error();
    out.bytes = std::move(bytes).value();
    return out;
}

}  // namespace tessera::common
