// Weight-delta codecs: a set of named f32 tensors encoded as f32, bf16, blockwise int8 or
// packed blockwise int4 / int2, optionally top-k sparsified, into a safetensors file Python can read (docs/tensor_format.md,
// "Delta files"). Encoding returns the residual (input − what decoding gives back) so the
// caller can feed it into the next delta: error feedback.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// One named dense f32 tensor, owned.
struct NamedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> values;
};
using NamedTensors = std::vector<NamedTensor>;

enum class DeltaDType { F32, BF16, Int8, Int4, Int2 };
std::string_view delta_dtype_name(DeltaDType dtype);  // "f32", "bf16", "int8", "int4", "int2"
std::optional<DeltaDType> delta_dtype_from_name(std::string_view name);
// 4 or 2 for the packed low-bit dtypes (common/lowbit_blockwise.h), 0 for the others.
int packed_bits(DeltaDType dtype);

struct DeltaEncoding {
    DeltaDType dtype = DeltaDType::Int8;
    // Fraction of each tensor's entries kept, by magnitude; 1 keeps all (dense).
    double topk_fraction = 1.0;
    // Whether the volunteer adds its carried error-feedback residual before encoding. A
    // replicated unit's twins encode their deltas alone (each keeps its residual, with what
    // this encoding left out, for its next unit), so that their uploads can agree. Part of the
    // unit's instructions only: not written into the delta file.
    bool carry_residual = true;
};

// Tensor names may not contain this: it separates a tensor's name from its parts' suffixes.
constexpr char kDeltaPartSeparator = '#';

struct EncodedDelta {
    Bytes bytes;
    NamedTensors residual;  // same names and shapes as the input
};

// Fails on non-finite values, names with '#', duplicate names or a fraction outside (0, 1].
Result<EncodedDelta> encode_delta(const NamedTensors& delta, const DeltaEncoding& encoding);

// One tensor whose values were encoded elsewhere (on the GPU that trained them): all its
// values, or the entries a top-k selection kept with their flat indices in ascending order.
// `values` holds the encoding's dtype (f32, bf16 bits, int8, or int4 / int2 packed as
// lowbit_blockwise.h packs them) in host byte order; the integer dtypes come with one absmax
// scale per 256 values (common/int8_blockwise.h).
struct EncodedTensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<std::int32_t> indices;  // top-k only; empty for dense tensors
    Bytes values;
    std::vector<float> scales;  // int8, int4, int2 only
};

// Writes a delta file from encoded tensors: the bytes encode_delta gives for the same values
// and selection. Checks names, sizes, index order and bounds, scale counts, finite values.
Result<Bytes> write_encoded_delta(const std::vector<EncodedTensor>& tensors, const DeltaEncoding& encoding);

struct DeltaDecodeLimits {
    std::uint64_t max_elements = std::uint64_t{1} << 28;  // over all tensors
};

struct DecodedDelta {
    DeltaEncoding encoding;
    NamedTensors tensors;  // sorted by name
    // Σ over the values of the integer dtypes (int8, int4, int2) of their block's scale², the
    // quantisation step squared: how far error feedback may move an honest delta. 0 for f32
    // and bf16.
    double step_power = 0;
};

// Decodes untrusted bytes, a delta file or a zstd frame holding one (as volunteers upload it;
// it may expand to at most 8 bytes a value plus 17 MiB); every inconsistency is a named error.
Result<DecodedDelta> decode_delta(ByteView bytes, const DeltaDecodeLimits& limits = {});

}  // namespace tessera::common
