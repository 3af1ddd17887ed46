// Caption texts read from a shard's `captions` tensor, compressed or not, and the errors a
// malformed one gets.
#include <doctest/doctest.h>

#include <cstring>

#include "caption_text.h"
#include "safetensors.h"
#include "zstd_codec.h"

using namespace tessera::common;

namespace {

Bytes shard_with(const std::vector<std::string>& captions, std::size_t width, DType dtype = DType::U8) {
    std::vector<std::uint8_t> bytes(captions.size() * width, 0);
    for (std::size_t i = 0; i < captions.size(); ++i)
        std::memcpy(bytes.data() + i * width, captions[i].data(), std::min(width, captions[i].size()));
    std::vector<std::int64_t> labels(captions.size(), 0);
    std::vector<TensorView> views{
        {"captions", dtype, {static_cast<std::int64_t>(captions.size()), static_cast<std::int64_t>(width / dtype_size(dtype))},
         {bytes.data(), bytes.size()}},
        {"labels", DType::I64, {static_cast<std::int64_t>(labels.size())},
         {reinterpret_cast<const std::uint8_t*>(labels.data()), labels.size() * 8}}};
    return write_safetensors(views).value();
}

}  // namespace

TEST_CASE("captions come back as texts, the first few, from compressed shards too") {
    auto bytes = shard_with({"a bag left of a dark shirt", "a sneaker above a bag", "ünïcode"}, 32);
    auto two = read_caption_texts(bytes, 2);
    REQUIRE(two.ok());
    CHECK(*two == std::vector<std::string>{"a bag left of a dark shirt", "a sneaker above a bag"});
    auto compressed = zstd_compress(bytes, 3).value();
    auto all = read_caption_texts(compressed, 10);
    REQUIRE(all.ok());
    CHECK(all->size() == 3);
    CHECK(all->back() == "ünïcode");
}

TEST_CASE("a shard without captions has none; a malformed one gets a named error") {
    std::vector<std::int64_t> labels{1, 2};
    std::vector<TensorView> views{
        {"labels", DType::I64, {2}, {reinterpret_cast<const std::uint8_t*>(labels.data()), 16}}};
    auto none = read_caption_texts(write_safetensors(views).value(), 4);
    REQUIRE(none.ok());
    CHECK(none->empty());
    auto wrong_dtype = read_caption_texts(shard_with({"ab", "cd"}, 4, DType::I32), 4);
    REQUIRE_FALSE(wrong_dtype.ok());
    CHECK(wrong_dtype.message().find("U8") != std::string::npos);
    auto bad_utf8 = read_caption_texts(shard_with({"ok", std::string("\xC3\x28", 2)}, 8), 4);
    REQUIRE_FALSE(bad_utf8.ok());
    CHECK(bad_utf8.message().find("caption 1") != std::string::npos);
    auto overlong = read_caption_texts(shard_with({std::string("\xC0\xAF", 2)}, 8), 4);
    CHECK_FALSE(overlong.ok());
    auto surrogate = read_caption_texts(shard_with({std::string("\xED\xA0\x80", 3)}, 8), 4);
    CHECK_FALSE(surrogate.ok());
    auto truncated = read_caption_texts(shard_with({std::string("ab\xE2\x82", 4)}, 4), 4);
    CHECK_FALSE(truncated.ok());
    CHECK_FALSE(read_caption_texts(Bytes{1, 2, 3}, 4).ok());
}
