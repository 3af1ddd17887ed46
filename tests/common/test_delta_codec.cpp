// Delta codecs: error bounds for each dtype, top-k with error feedback, and a decoder that
// refuses damaged or lying files.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "corrupt.h"
#include "delta_codec.h"
#include "int8_blockwise.h"
#include "safetensors.h"

using namespace tessera::common;

namespace {

NamedTensors sample_delta(std::uint32_t seed = 1) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.01f);
    NamedTensors delta{{"blocks.0.attn.weight", {16, 40}, {}}, {"blocks.0.bias", {40}, {}}, {"scalar", {}, {}}};
    for (auto& t : delta) {
        std::size_t n = 1;
        for (auto d : t.shape) n *= static_cast<std::size_t>(d);
        for (std::size_t i = 0; i < n; ++i) t.values.push_back(normal(rng));
    }
    delta[0].values[7] = 0.5f;  // one outlier inside a block
    return delta;
}

const NamedTensor& by_name(const NamedTensors& tensors, const std::string& name) {
    for (const auto& t : tensors)
        if (t.name == name) return t;
    FAIL("no tensor " << name);
    return tensors.front();
}

Bytes encode(const NamedTensors& delta, DeltaDType dtype, double fraction = 1.0) {
    return encode_delta(delta, {dtype, fraction}).value().bytes;
}

// Rewrites a delta file with one part's raw bytes or shape replaced.
Bytes rewrite(const Bytes& original, const std::function<void(std::vector<TensorView>&, TensorMetadata&)>& edit) {
    auto file = parse_safetensors(original).value();
    std::vector<TensorView> views = file.tensors();
    TensorMetadata metadata = file.metadata();
    edit(views, metadata);
    return write_safetensors(views, metadata).value();
}

std::string decode_error(const Bytes& bytes) {
    auto decoded = decode_delta(bytes);
    return decoded.ok() ? std::string("(accepted)") : decoded.message();
}

}  // namespace

TEST_CASE("f32 round trip is exact") {
    auto delta = sample_delta();
    auto decoded = decode_delta(encode(delta, DeltaDType::F32));
    REQUIRE(decoded.ok());
    CHECK(decoded->encoding.dtype == DeltaDType::F32);
    for (const auto& t : delta) {
        CHECK(by_name(decoded->tensors, t.name).values == t.values);
        CHECK(by_name(decoded->tensors, t.name).shape == t.shape);
    }
}

TEST_CASE("bf16 round trip is within bf16 precision") {
    auto delta = sample_delta();
    auto decoded = decode_delta(encode(delta, DeltaDType::BF16)).value();
    for (const auto& t : delta)
        for (std::size_t i = 0; i < t.values.size(); ++i)
            CHECK(std::fabs(by_name(decoded.tensors, t.name).values[i] - t.values[i]) <=
                  std::fabs(t.values[i]) * (1.0f / 256.0f));
}

TEST_CASE("int8 round trip error is at most half a block's scale") {
    auto delta = sample_delta();
    auto decoded = decode_delta(encode(delta, DeltaDType::Int8)).value();
    for (const auto& t : delta) {
        const auto& back = by_name(decoded.tensors, t.name).values;
        for (std::size_t block = 0; block < int8_block_count(t.values.size()); ++block) {
            std::size_t begin = block * kInt8BlockSize, end = std::min(begin + kInt8BlockSize, t.values.size());
            float absmax = 0;
            for (std::size_t i = begin; i < end; ++i) absmax = std::max(absmax, std::fabs(t.values[i]));
            float bound = absmax / 127.0f / 2.0f * 1.0001f + 1e-12f;
            for (std::size_t i = begin; i < end; ++i) CHECK(std::fabs(back[i] - t.values[i]) <= bound);
        }
    }
}

TEST_CASE("int8 encoding is about a quarter of f32") {
    NamedTensors delta{{"w", {256, 256}, std::vector<float>(256 * 256, 0.25f)}};
    double ratio = static_cast<double>(encode(delta, DeltaDType::Int8).size()) /
                   static_cast<double>(encode(delta, DeltaDType::F32).size());
    CHECK(ratio < 0.26);
    CHECK(ratio > 0.25);
}

TEST_CASE("the residual is exactly input minus decoded") {
    auto delta = sample_delta();
    for (auto dtype : {DeltaDType::F32, DeltaDType::BF16, DeltaDType::Int8, DeltaDType::Int4, DeltaDType::Int2}) {
        for (double fraction : {1.0, 0.1}) {
            auto encoded = encode_delta(delta, {dtype, fraction}).value();
            auto decoded = decode_delta(encoded.bytes).value();
            for (const auto& t : delta) {
                const auto& back = by_name(decoded.tensors, t.name).values;
                const auto& residual = by_name(encoded.residual, t.name).values;
                for (std::size_t i = 0; i < t.values.size(); ++i)
                    CHECK(back[i] + residual[i] == doctest::Approx(t.values[i]).epsilon(1e-6));
            }
        }
    }
}

TEST_CASE("top-k keeps the largest magnitudes and zeroes the rest") {
    NamedTensors delta{{"w", {2, 5}, {0.1f, -0.9f, 0.2f, 0.05f, 0.7f, -0.3f, 0.0f, 0.01f, -0.02f, 0.4f}}};
    auto encoded = encode_delta(delta, {DeltaDType::F32, 0.3}).value();
    auto decoded = decode_delta(encoded.bytes).value();
    CHECK(decoded.encoding.topk_fraction == doctest::Approx(0.3));
    const auto& values = decoded.tensors[0].values;
    CHECK(decoded.tensors[0].shape == std::vector<std::int64_t>{2, 5});
    CHECK(values == std::vector<float>{0, -0.9f, 0, 0, 0.7f, 0, 0, 0, 0, 0.4f});
    CHECK(encoded.residual[0].values[1] == 0.0f);
    CHECK(encoded.residual[0].values[0] == 0.1f);
}

TEST_CASE("error feedback: the sum of decoded deltas tracks the sum of true deltas") {
    // With feedback the carried residual stays bounded, so the running sums stay close;
    // without it, the dropped mass accumulates.
    auto step = sample_delta(3);
    NamedTensors residual = step;
    for (auto& t : residual) std::fill(t.values.begin(), t.values.end(), 0.0f);
    std::vector<double> applied(step[0].values.size(), 0.0), truth(step[0].values.size(), 0.0);
    for (int round = 0; round < 20; ++round) {
        auto input = step;
        for (std::size_t k = 0; k < input.size(); ++k)
            for (std::size_t i = 0; i < input[k].values.size(); ++i) input[k].values[i] += residual[k].values[i];
        auto encoded = encode_delta(input, {DeltaDType::Int8, 0.05}).value();
        residual = encoded.residual;
        auto decoded = decode_delta(encoded.bytes).value();
        const auto& w = by_name(decoded.tensors, step[0].name).values;
        for (std::size_t i = 0; i < w.size(); ++i) {
            applied[i] += w[i];
            truth[i] += step[0].values[i];
        }
    }
    double max_gap = 0, max_truth = 0;
    for (std::size_t i = 0; i < truth.size(); ++i) {
        max_gap = std::max(max_gap, std::fabs(applied[i] - truth[i]));
        max_truth = std::max(max_truth, std::fabs(truth[i]));
    }
    // The gap equals the final residual, which stays far below the accumulated truth.
    CHECK(max_gap < 0.5 * max_truth);
}

TEST_CASE("encoder refuses bad input") {
    auto delta = sample_delta();
    delta[1].values[0] = std::nanf("");
    CHECK(encode_delta(delta, {}).message().find("non-finite") != std::string::npos);
    CHECK_FALSE(encode_delta({{"a#b", {1}, {1.0f}}}, {}).ok());
    CHECK_FALSE(encode_delta({{"a", {2}, {1.0f}}}, {}).ok());
    CHECK_FALSE(encode_delta({{"a", {1}, {1.0f}}, {"a", {1}, {1.0f}}}, {}).ok());
    CHECK_FALSE(encode_delta(sample_delta(), {DeltaDType::Int8, 0.0}).ok());
    CHECK_FALSE(encode_delta(sample_delta(), {DeltaDType::Int8, 1.5}).ok());
}

TEST_CASE("the decoder never crashes on truncated or flipped files") {
    for (double fraction : {1.0, 0.2}) {
        auto bytes = encode(sample_delta(), DeltaDType::Int8, fraction);
        tessera::testing::for_each_truncation(bytes,
                                              [](const Bytes& damaged) { CHECK_FALSE(decode_delta(damaged).ok()); });
        for (std::uint8_t mask : {0x01, 0x80, 0xff})
            tessera::testing::for_each_flip(bytes, mask, [](const Bytes& damaged, std::size_t) {
                auto decoded = decode_delta(damaged);
                if (decoded.ok()) CHECK(decoded->tensors.size() == 3);
            });
    }
}

TEST_CASE("lies in a delta file give specific errors") {
    auto dense = encode(sample_delta(), DeltaDType::Int8);
    auto sparse = encode(sample_delta(), DeltaDType::Int8, 0.2);

    CHECK(decode_error(rewrite(dense, [](auto&, auto& meta) {
              meta["format"] = "other";
          })).find("not a tessera.delta") != std::string::npos);
    CHECK(decode_error(rewrite(dense, [](auto&, auto& meta) { meta["dtype"] = "int3"; })).find("unknown dtype") !=
          std::string::npos);
    CHECK(decode_error(rewrite(dense, [](auto&, auto& meta) { meta["topk_fraction"] = "2"; })).find("topk_fraction") !=
          std::string::npos);
    CHECK(decode_error(rewrite(dense, [](auto&, auto& meta) { meta["dtype"] = "f32"; })).find("is stored as I8") !=
          std::string::npos);
    CHECK(decode_error(rewrite(dense, [](auto& views, auto&) {
              std::erase_if(views, [](const TensorView& v) { return v.name == "scalar#scale"; });
          })).find("no #scale") != std::string::npos);
    CHECK(decode_error(rewrite(dense, [](auto& views, auto&) {
              views[0].name += "#bogus";
          })).find("unknown part suffix") != std::string::npos);

    // A scale vector of the wrong length.
    CHECK(decode_error(rewrite(dense, [](auto& views, auto&) {
              for (auto& v : views)
                  if (v.name == "blocks.0.attn.weight#scale") {
                      v.shape = {1};
                      v.data = v.data.first(4);
                  }
          })).find("block scales") != std::string::npos);

    // A negative scale.
    static const float negative = -1.0f;
    CHECK(decode_error(rewrite(dense, [](auto& views, auto&) {
              for (auto& v : views)
                  if (v.name == "scalar#scale") v.data = ByteView(reinterpret_cast<const std::uint8_t*>(&negative), 4);
          })).find("negative or non-finite scale") != std::string::npos);

    // Sparse: indices out of order or out of range, a huge claimed shape, a missing part.
    static const std::vector<std::int32_t> unordered{5,  3,  9,  1,  0,  2,  4,  6,  7,  8,  10, 11, 12, 13,
                                                     14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
                                                     28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39};
    CHECK(decode_error(rewrite(sparse, [](auto& views, auto&) {
              for (auto& v : views)
                  if (v.name == "blocks.0.bias#index") {  // I32 indices, as a version-1 writer stored them
                      v.dtype = DType::I32;
                      v.shape = {8};
                      v.data = ByteView(reinterpret_cast<const std::uint8_t*>(unordered.data()), 32);
                  }
          })).find("strictly increasing") != std::string::npos);
    static const std::vector<std::int64_t> huge{1 << 30, 1 << 30};
    CHECK(decode_error(rewrite(sparse, [](auto& views, auto&) {
              for (auto& v : views)
                  if (v.name == "blocks.0.attn.weight#shape")
                      v.data = ByteView(reinterpret_cast<const std::uint8_t*>(huge.data()), 16);
          })).find("element limit") != std::string::npos);
    CHECK(decode_error(rewrite(sparse, [](auto& views, auto&) {
              std::erase_if(views, [](const TensorView& v) { return v.name == "scalar#shape"; });
          })).find("needs #index, #value and #shape") != std::string::npos);
}

TEST_CASE("the element limit bounds what decoding allocates") {
    auto bytes = encode(sample_delta(), DeltaDType::F32);
    CHECK(decode_delta(bytes, {.max_elements = 1000}).ok());
    CHECK(decode_delta(bytes, {.max_elements = 100}).message().find("limit") != std::string::npos);
}

TEST_CASE("write_encoded_delta writes encode_delta's bytes for values encoded elsewhere") {
    NamedTensors delta{{"w", {3, 100}, std::vector<float>(300)}};
    for (std::size_t i = 0; i < 300; ++i) delta[0].values[i] = std::sin(static_cast<float>(i)) * 0.01f;
    // Dense int8, as a GPU kernel would hand it over.
    std::vector<std::int8_t> q(300);
    std::vector<float> scales(int8_block_count(300));
    quantize_int8_blockwise(delta[0].values, q, scales);
    EncodedTensor dense{"w", {3, 100}, {}, Bytes(q.begin(), q.end()), scales};
    auto written = write_encoded_delta({dense}, {DeltaDType::Int8, 1.0});
    REQUIRE(written.ok());
    CHECK(*written == encode_delta(delta, {DeltaDType::Int8, 1.0}).value().bytes);

    // Top-k f32: the kept values and their ascending indices (the 30 largest magnitudes).
    auto expected = encode_delta(delta, {DeltaDType::F32, 0.1}).value();
    auto decoded = decode_delta(expected.bytes).value();
    EncodedTensor sparse{"w", {3, 100}, {}, {}, {}};
    std::vector<float> kept;
    for (std::int32_t i = 0; i < 300; ++i)
        if (decoded.tensors[0].values[i] != 0.0f) {
            sparse.indices.push_back(i);
            kept.push_back(decoded.tensors[0].values[i]);
        }
    REQUIRE(kept.size() == 30);
    sparse.values.resize(kept.size() * 4);
    std::memcpy(sparse.values.data(), kept.data(), sparse.values.size());
    CHECK(write_encoded_delta({sparse}, {DeltaDType::F32, 0.1}).value() == expected.bytes);

    SUBCASE("and refuses what encode_delta would not write") {
        auto bad = sparse;
        std::swap(bad.indices[0], bad.indices[1]);
        CHECK_FALSE(write_encoded_delta({bad}, {DeltaDType::F32, 0.1}).ok());  // indices out of order
        bad = sparse;
        bad.indices.back() = 300;
        CHECK_FALSE(write_encoded_delta({bad}, {DeltaDType::F32, 0.1}).ok());  // index out of range
        bad = sparse;
        bad.values.pop_back();
        CHECK_FALSE(write_encoded_delta({bad}, {DeltaDType::F32, 0.1}).ok());  // values and indices disagree
        float nan = std::nanf("");
        std::memcpy(bad.values.data(), &nan, 4);
        bad.values.push_back(0);
        CHECK_FALSE(write_encoded_delta({bad}, {DeltaDType::F32, 0.1}).ok());     // non-finite value
        CHECK_FALSE(write_encoded_delta({sparse}, {DeltaDType::F32, 1.0}).ok());  // indices in a dense delta
        auto few_scales = dense;
        few_scales.scales.pop_back();
        CHECK_FALSE(write_encoded_delta({few_scales}, {DeltaDType::Int8, 1.0}).ok());
        CHECK_FALSE(write_encoded_delta({dense, dense}, {DeltaDType::Int8, 1.0}).ok());  // duplicate names
        auto hashed = dense;
        hashed.name = "w#scale";
        CHECK_FALSE(write_encoded_delta({hashed}, {DeltaDType::Int8, 1.0}).ok());
    }
}
