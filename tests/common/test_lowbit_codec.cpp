// The low-bit delta dtypes (int4, int2) and the gap-coded sparse indices: error bounds, sizes,
// the bytes a GPU-side writer gives, and files that lie.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "delta_codec.h"
#include "index_gaps.h"
#include "int8_blockwise.h"
#include "lowbit_blockwise.h"
#include "safetensors.h"
#include "zstd_codec.h"

using namespace tessera::common;

namespace {

std::vector<float> normal_values(std::size_t n, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    std::vector<float> values(n);
    for (auto& v : values) v = normal(rng);
    return values;
}

// Rewrites one part of a delta file.
Bytes rewrite_part(const Bytes& original, const std::string& part, const std::function<void(TensorView&)>& edit) {
    auto file = parse_safetensors(original).value();
    std::vector<TensorView> views = file.tensors();
    for (auto& view : views)
        if (view.name == part) edit(view);
    return write_safetensors(views, file.metadata()).value();
}

}  // namespace

TEST_CASE("int4 and int2 decode within half a block's step, and never to 0 from a non-zero block") {
    auto values = normal_values(1000, 7);
    values[3] = 0.2f;  // an outlier sets block 0's scale
    for (int bits : {4, 2}) {
        auto packed = quantize_packed_blockwise(values, bits);
        CHECK(packed.packed.size() == packed_byte_count(values.size(), bits));
        auto back = dequantize_packed_blockwise(packed.packed, packed.scales, values.size(), bits).value();
        float top = static_cast<float>(1 << (bits - 1)) - 0.5f;
        for (std::size_t block = 0; block < int8_block_count(values.size()); ++block) {
            std::size_t begin = block * kInt8BlockSize, end = std::min(begin + kInt8BlockSize, values.size());
            float absmax = 0;
            for (std::size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(values[i]));
            CHECK(packed.scales[block] == doctest::Approx(absmax / top));
            float bound = packed.scales[block] / 2.0f * 1.0001f;
            for (std::size_t i = begin; i < end; ++i) {
                CHECK(std::fabs(back[i] - values[i]) <= bound);
                CHECK(back[i] != 0.0f);
            }
        }
    }
    // A block of zeros decodes to zeros.
    std::vector<float> zeros(300, 0.0f);
    auto packed = quantize_packed_blockwise(zeros, 2);
    CHECK(dequantize_packed_blockwise(packed.packed, packed.scales, 300, 2).value() == zeros);
}

TEST_CASE("packed values refuse a wrong byte count, a bad scale, and padding bits set") {
    auto values = normal_values(5, 1);  // 5 int2 values: 10 bits, so 6 padding bits
    auto packed = quantize_packed_blockwise(values, 2);
    REQUIRE(packed.packed.size() == 2);
    CHECK(dequantize_packed_blockwise(packed.packed, packed.scales, 5, 2).ok());
    CHECK(dequantize_packed_blockwise(packed.packed, packed.scales, 9, 2).message().find("take 3 bytes") !=
          std::string::npos);
    auto padded = packed.packed;
    padded[1] |= 0x80;
    CHECK(dequantize_packed_blockwise(padded, packed.scales, 5, 2).message().find("padding") != std::string::npos);
    std::vector<float> negative{-1.0f};
    CHECK(dequantize_packed_blockwise(packed.packed, negative, 5, 2).message().find("scale") != std::string::npos);
    CHECK_FALSE(dequantize_packed_blockwise(packed.packed, {}, 5, 2).ok());
}

TEST_CASE("index gaps round-trip and refuse truncated, over-long and out-of-range varints") {
    std::vector<std::int32_t> indices{0, 1, 5, 127, 128, 300, 70000, 2000000000};
    auto gaps = encode_index_gaps(indices);
    CHECK(decode_index_gaps(gaps, 2000000001).value() == indices);
    CHECK(decode_index_gaps(gaps, 2000000000).message().find("outside") != std::string::npos);
    // Dense-ish selections take one byte an index.
    std::vector<std::int32_t> dense;
    for (std::int32_t i = 0; i < 1000; i += 3) dense.push_back(i);
    CHECK(encode_index_gaps(dense).size() == dense.size());

    auto cut = gaps;
    cut.pop_back();
    CHECK(decode_index_gaps(cut, 1ull << 31).message().find("cut short") != std::string::npos);
    Bytes too_long{0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
    CHECK(decode_index_gaps(too_long, 1ull << 40).message().find("longer than 5") != std::string::npos);
    Bytes padded{0x85, 0x00};
    CHECK(decode_index_gaps(padded, 100).message().find("needless") != std::string::npos);
    CHECK(decode_index_gaps({}, 10).value().empty());
}

TEST_CASE("top-k 1 % with int2 values and gap-coded indices is over 200 times smaller than dense f32") {
    NamedTensors delta{{"w", {256, 1024}, normal_values(256 * 1024, 3)}};
    auto f32 = encode_delta(delta, {DeltaDType::F32, 1.0}).value().bytes.size();
    auto int8 = encode_delta(delta, {DeltaDType::Int8, 0.01}).value().bytes.size();
    auto int2 = encode_delta(delta, {DeltaDType::Int2, 0.01}).value();
    CHECK(static_cast<double>(f32) / static_cast<double>(int2.bytes.size()) > 200.0);
    CHECK(int2.bytes.size() < int8);
    // Every kept entry decodes non-zero, at its index, and the rest are 0.
    auto decoded = decode_delta(int2.bytes).value();
    CHECK(decoded.encoding.dtype == DeltaDType::Int2);
    std::size_t kept = 0;
    for (float v : decoded.tensors[0].values) kept += v != 0.0f;
    CHECK(kept == 2622);  // ceil(0.01 × 262 144)
}

TEST_CASE("a dense int4 tensor is stored as #value, #scale and #shape and decodes to its shape") {
    NamedTensors delta{{"w", {3, 7}, normal_values(21, 5)}};
    auto encoded = encode_delta(delta, {DeltaDType::Int4, 1.0}).value();
    auto file = parse_safetensors(encoded.bytes).value();
    std::vector<std::string> names;
    for (const auto& view : file.tensors()) names.push_back(view.name);
    CHECK(names == std::vector<std::string>{"w#scale", "w#shape", "w#value"});
    auto decoded = decode_delta(encoded.bytes).value();
    CHECK(decoded.tensors[0].shape == std::vector<std::int64_t>{3, 7});
    for (std::size_t i = 0; i < 21; ++i)
        CHECK(decoded.tensors[0].values[i] + encoded.residual[0].values[i] == doctest::Approx(delta[0].values[i]));

    // Lies: the file says int8 for packed bytes; packed values without a shape; a dense part.
    auto as_int8 = encoded.bytes;
    {
        auto f = parse_safetensors(as_int8).value();
        auto metadata = f.metadata();
        metadata["dtype"] = "int8";
        as_int8 = write_safetensors(f.tensors(), metadata).value();
    }
    CHECK(decode_delta(as_int8).message().find("needs #index") != std::string::npos);
    auto no_shape = encode_delta({{"w", {21}, delta[0].values}}, {DeltaDType::Int4, 1.0}).value().bytes;
    {
        auto f = parse_safetensors(no_shape).value();
        std::vector<TensorView> views = f.tensors();
        std::erase_if(views, [](const TensorView& v) { return v.name == "w#shape"; });
        no_shape = write_safetensors(views, f.metadata()).value();
    }
    CHECK(decode_delta(no_shape).message().find("needs #index, #value and #shape") != std::string::npos);
    auto short_values = rewrite_part(encoded.bytes, "w#value", [](TensorView& v) {
        v.shape = {static_cast<std::int64_t>(v.data.size() - 1)};
        v.data = v.data.first(v.data.size() - 1);
    });
    CHECK(decode_delta(short_values).message().find("bytes") != std::string::npos);
}

TEST_CASE("write_encoded_delta writes encode_delta's bytes for packed values encoded elsewhere") {
    NamedTensors delta{{"w", {4, 100}, normal_values(400, 9)}};
    for (auto dtype : {DeltaDType::Int4, DeltaDType::Int2}) {
        auto packed = quantize_packed_blockwise(delta[0].values, packed_bits(dtype));
        EncodedTensor dense{"w", {4, 100}, {}, packed.packed, packed.scales};
        CHECK(write_encoded_delta({dense}, {dtype, 1.0}).value() == encode_delta(delta, {dtype, 1.0}).value().bytes);

        // Top-k: the 40 largest magnitudes, ascending, then packed.
        std::vector<std::int32_t> order(400);
        for (std::int32_t i = 0; i < 400; ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](auto a, auto b) { return std::fabs(delta[0].values[a]) > std::fabs(delta[0].values[b]); });
        order.resize(40);
        std::sort(order.begin(), order.end());
        std::vector<float> kept;
        for (auto i : order) kept.push_back(delta[0].values[i]);
        auto kept_packed = quantize_packed_blockwise(kept, packed_bits(dtype));
        EncodedTensor sparse{"w", {4, 100}, order, kept_packed.packed, kept_packed.scales};
        CHECK(write_encoded_delta({sparse}, {dtype, 0.1}).value() == encode_delta(delta, {dtype, 0.1}).value().bytes);

        auto bad = sparse;
        bad.values.pop_back();
        CHECK_FALSE(write_encoded_delta({bad}, {dtype, 0.1}).ok());
        bad = sparse;
        bad.scales[0] = std::nanf("");
        CHECK_FALSE(write_encoded_delta({bad}, {dtype, 0.1}).ok());
    }
}

TEST_CASE("a delta in a zstd frame decodes as the file it holds; a frame past the cap or inside a frame does not") {
    NamedTensors delta{{"w", {64, 64}, normal_values(64 * 64, 11)}};
    auto file = encode_delta(delta, {DeltaDType::Int4, 0.05}).value().bytes;
    auto framed = zstd_compress(file).value();
    CHECK(framed.size() < file.size());
    CHECK(decode_delta(framed).value().tensors[0].values == decode_delta(file).value().tensors[0].values);
    CHECK(decode_delta(zstd_compress(framed).value()).message().find("inside a zstd frame") != std::string::npos);
    // A frame that expands past 8 bytes a value plus 17 MiB: 40 MiB of zeros for a 4096-value limit.
    auto bomb = zstd_compress(Bytes(40u << 20, 0)).value();
    CHECK(decode_delta(bomb, {.max_elements = 4096}).message().find("delta") != std::string::npos);
}

TEST_CASE("the decoder reports the quantisation steps' power of the integer dtypes, 0 for f32 and bf16") {
    NamedTensors delta{{"w", {300}, normal_values(300, 13)}};
    CHECK(decode_delta(encode_delta(delta, {DeltaDType::F32, 1.0}).value().bytes).value().step_power == 0);
    CHECK(decode_delta(encode_delta(delta, {DeltaDType::BF16, 1.0}).value().bytes).value().step_power == 0);
    for (auto dtype : {DeltaDType::Int8, DeltaDType::Int4, DeltaDType::Int2}) {
        std::vector<float> scales;
        if (dtype == DeltaDType::Int8) {
            std::vector<std::int8_t> q(300);
            scales.resize(int8_block_count(300));
            quantize_int8_blockwise(delta[0].values, q, scales);
        } else {
            scales = quantize_packed_blockwise(delta[0].values, packed_bits(dtype)).scales;
        }
        double expected = 256.0 * scales[0] * scales[0] + 44.0 * scales[1] * scales[1];
        auto decoded = decode_delta(encode_delta(delta, {dtype, 1.0}).value().bytes).value();
        CHECK(decoded.step_power == doctest::Approx(expected));
    }
    // Sparse: only the 30 kept values' steps, one block whose largest value is the tensor's.
    float absmax = 0;
    for (float v : delta[0].values) absmax = std::max(absmax, std::fabs(v));
    auto sparse = decode_delta(encode_delta(delta, {DeltaDType::Int4, 0.1}).value().bytes).value();
    CHECK(sparse.step_power == doctest::Approx(30.0 * (absmax / 7.5) * (absmax / 7.5)));
}
