// Safetensors: round trips, and a reader that refuses every kind of damaged or lying file.
#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>

#include "checkpoint.h"
#include "corrupt.h"
#include "half.h"
#include "mapped_file.h"
#include "safetensors.h"
#include "temp_dir.h"

using namespace tessera::common;

namespace {

// A file from a hand-written header and data section.
Bytes make_file(const std::string& header, const Bytes& data = {}) {
    std::uint64_t length = header.size();
    Bytes out(8 + header.size() + data.size());
    std::memcpy(out.data(), &length, 8);
    std::memcpy(out.data() + 8, header.data(), header.size());
    if (!data.empty()) std::memcpy(out.data() + 8 + header.size(), data.data(), data.size());
    return out;
}

template <class T>
ByteView bytes_of(const std::vector<T>& values) {
    return {reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(T)};
}

std::string error_of(const Bytes& file) {
    auto parsed = parse_safetensors(file);
    return parsed.ok() ? std::string("(accepted)") : parsed.message();
}

struct Sample {
    std::vector<float> weights{1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, 42.0f};
    std::vector<std::int64_t> labels{3, 1, 4, 1, 5};
    std::vector<std::uint16_t> halves{f32_to_f16(0.5f), f32_to_f16(-1.0f)};
    std::vector<std::int8_t> small{-128, 0, 127};

    Bytes write() const {
        std::vector<TensorView> views{
            {"layer.weight", DType::F32, {2, 3}, bytes_of(weights)},
            {"labels", DType::I64, {5}, bytes_of(labels)},
            {"latents", DType::F16, {1, 2}, bytes_of(halves)},
            {"q", DType::I8, {3}, bytes_of(small)},
            {"empty", DType::F32, {0, 4}, {}},
        };
        return write_safetensors(views, {{"format", "pt"}, {"note", "sample"}}).value();
    }
};

}  // namespace

TEST_CASE("round trip keeps names, dtypes, shapes, data and metadata") {
    Sample sample;
    auto bytes = sample.write();
    auto file = parse_safetensors(bytes);
    REQUIRE(file.ok());
    CHECK(file->tensors().size() == 5);
    CHECK(file->metadata().at("note") == "sample");

    const auto* weight = file->find("layer.weight");
    REQUIRE(weight != nullptr);
    CHECK(weight->dtype == DType::F32);
    CHECK(weight->shape == std::vector<std::int64_t>{2, 3});
    CHECK(*read_as_f32(*weight) == sample.weights);
    // Zero-copy: the view points into the buffer it was parsed from.
    CHECK(weight->data.data() >= bytes.data());
    CHECK(weight->data.data() + weight->data.size() <= bytes.data() + bytes.size());

    auto latents = read_as_f32(*file->find("latents"));
    CHECK(*latents == std::vector<float>{0.5f, -1.0f});
    CHECK(file->find("empty")->numel() == 0);
    CHECK(file->find("q")->data[0] == 0x80);
    CHECK_FALSE(read_as_f32(*file->find("labels")).ok());
    CHECK(file->find("absent") == nullptr);
}

TEST_CASE("the header is padded to 8 bytes, as Python's safetensors expects") {
    auto bytes = Sample().write();
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    CHECK(length % 8 == 0);
}

TEST_CASE("a hand-made file in the reference layout parses") {
    Bytes data(8);
    float values[2] = {1.0f, 2.0f};
    std::memcpy(data.data(), values, 8);
    auto bytes = make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", data);
    auto file = parse_safetensors(bytes);  // views borrow `bytes`, which must outlive them
    REQUIRE(file.ok());
    CHECK(*read_as_f32(*file->find("a")) == std::vector<float>{1.0f, 2.0f});
}

TEST_CASE("memory-mapped file parses in place") {
    tessera::testing::TempDir dir;
    auto bytes = Sample().write();
    std::ofstream(dir / "s.safetensors", std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    auto mapped = MappedFile::open(dir / "s.safetensors");
    REQUIRE(mapped.ok());
    auto file = parse_safetensors(mapped->bytes());
    REQUIRE(file.ok());
    CHECK(file->find("labels")->data.data() > mapped->bytes().data());
}

TEST_CASE("writer refuses inconsistent input") {
    std::vector<float> values{1, 2, 3};
    CHECK_FALSE(write_safetensors({{"a", DType::F32, {2}, bytes_of(values)}}).ok());
    CHECK_FALSE(
        write_safetensors({{"a", DType::F32, {3}, bytes_of(values)}, {"a", DType::F32, {3}, bytes_of(values)}}).ok());
    CHECK_FALSE(write_safetensors({{"__metadata__", DType::F32, {3}, bytes_of(values)}}).ok());
    CHECK_FALSE(write_safetensors({{"", DType::F32, {3}, bytes_of(values)}}).ok());
}

TEST_CASE("every truncation is refused") {
    auto bytes = Sample().write();
    tessera::testing::for_each_truncation(bytes,
                                          [](const Bytes& damaged) { CHECK_FALSE(parse_safetensors(damaged).ok()); });
}

TEST_CASE("flipped bytes never crash; flips in the header are caught or harmless") {
    auto original = Sample().write();
    std::uint64_t header_length = 0;
    std::memcpy(&header_length, original.data(), 8);
    for (std::uint8_t mask : {0x01, 0x20, 0x80, 0xff}) {
        tessera::testing::for_each_flip(original, mask, [&](const Bytes& damaged, std::size_t at) {
            auto file = parse_safetensors(damaged);
            if (!file.ok()) {
                CHECK_FALSE(file.message().empty());
                return;
            }
            // Accepted: every view must still lie inside the buffer and match its dtype × shape.
            for (const auto& t : file->tensors()) {
                CHECK(t.data.data() >= damaged.data());
                CHECK(t.data.data() + t.data.size() <= damaged.data() + damaged.size());
                CHECK(t.data.size() == static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype));
            }
            if (at >= 8 + header_length) CHECK(file->tensors().size() == 5);
        });
    }
}

TEST_CASE("lies in the header give specific errors") {
    Bytes eight(8, 0);
    CHECK(error_of(Bytes{1, 2, 3}).find("too short") != std::string::npos);

    Bytes huge_length(16, 0);
    huge_length[7] = 0x7f;
    CHECK(error_of(huge_length).find("above the limit") != std::string::npos);

    Bytes past_end(16, 0);
    past_end[0] = 100;
    CHECK(error_of(past_end).find("runs past the end") != std::string::npos);

    CHECK(error_of(make_file("[1,2]")).find("not a JSON object") != std::string::npos);
    CHECK(error_of(make_file("{\"a\":")).find("invalid JSON") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                             eight))
              .find("duplicate key") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", eight))
              .find("unsupported dtype") != std::string::npos);
    CHECK(
        error_of(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,8]}})", eight)).find("need 4 bytes") !=
        std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", eight))
              .find("outside the data section") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight))
              .find("outside the data section") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight))
              .find("non-negative integer") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[1,1,1,1,1,1,1,1,2],"data_offsets":[0,8]}})", eight))
              .find("rank 9") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})",
                             eight))
              .find("more bytes than the file holds") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", eight))
              .find("unknown field") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"F32","shape":[2]}})", eight)).find("missing field \"data_offsets\"") !=
          std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
                             eight))
              .find("overlap or gap") != std::string::npos);
    CHECK(error_of(make_file(R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", eight))
              .find("belong to no tensor") != std::string::npos);
    CHECK(error_of(make_file(R"({"__metadata__":{"k":1}})")).find("not a string") != std::string::npos);
    CHECK(error_of(make_file(R"({"":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}})")).find("tensor name") !=
          std::string::npos);
    // Deep nesting is refused before it can exhaust the stack.
    CHECK(error_of(make_file(std::string(10000, '[') + std::string(10000, ']'))).find("invalid JSON") !=
          std::string::npos);
}

TEST_CASE("a zero-element tensor with huge other dimensions is fine and cannot overflow") {
    auto bytes =
        make_file(R"({"a":{"dtype":"F32","shape":[0,9223372036854775807,9223372036854775807],"data_offsets":[0,0]}})");
    auto file = parse_safetensors(bytes);
    REQUIRE(file.ok());
    CHECK(file->find("a")->numel() == 0);
}

TEST_CASE("a checkpoint's bytes are exactly those docs/tensor_format.md specifies") {
    auto bytes = write_checkpoint({{"w", {2}, {1.5f, -2.0f}}}, {"t", "dit-tiny", 3}).value();
    std::string header =
        R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"format":"tessera.checkpoint",)"
        R"("model":"dit-tiny","task":"t","version":"3"}})";
    REQUIRE(header.size() == 145);
    header.append(7, ' ');
    std::uint64_t length = 0;
    std::memcpy(&length, bytes.data(), 8);
    CHECK(length == 152);
    CHECK(std::string(reinterpret_cast<const char*>(bytes.data()) + 8, 152) == header);
    REQUIRE(bytes.size() == 8 + 152 + 8);
    float values[2];
    std::memcpy(values, bytes.data() + 160, 8);
    CHECK(values[0] == 1.5f);
    CHECK(values[1] == -2.0f);
}

TEST_CASE("bf16 rounds to nearest, ties to even, and keeps NaN a NaN") {
    CHECK(f32_to_bf16(1.0f) == 0x3f80);
    CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // a tie: to the even 0x3f80
    CHECK(f32_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // a tie: to the even 0x3f82
    CHECK(f32_to_bf16(std::bit_cast<float>(0x3f808001u)) == 0x3f81);  // above the tie: up
    CHECK(std::isnan(bf16_to_f32(f32_to_bf16(std::nanf("")))));
}
