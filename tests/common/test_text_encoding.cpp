// Hex and base64: known vectors, round trips, and rejection of malformed text.
#include <doctest/doctest.h>

#include "text_encoding.h"

using namespace tessera::common;

TEST_CASE("hex round trip and strictness") {
    Bytes bytes{0x00, 0x01, 0xab, 0xff};
    CHECK(to_hex(bytes) == "0001abff");
    CHECK(*from_hex("0001abff") == bytes);
    CHECK(*from_hex("0001ABFF") == bytes);
    CHECK_FALSE(from_hex("abc").ok());
    CHECK(from_hex("zz").message().find("non-hex") != std::string::npos);
    CHECK(is_lower_hex("00ff", 4));
    CHECK_FALSE(is_lower_hex("00FF", 4));
    CHECK_FALSE(is_lower_hex("00ff", 6));
}

TEST_CASE("base64 matches RFC 4648 vectors") {
    CHECK(to_base64(as_bytes("")) == "");
    CHECK(to_base64(as_bytes("f")) == "Zg==");
    CHECK(to_base64(as_bytes("fo")) == "Zm8=");
    CHECK(to_base64(as_bytes("foo")) == "Zm9v");
    CHECK(to_base64(as_bytes("foobar")) == "Zm9vYmFy");
    for (std::string text : {"", "f", "fo", "foo", "foob", "fooba", "foobar"}) {
        auto decoded = from_base64(to_base64(as_bytes(text)));
        REQUIRE(decoded.ok());
        CHECK(std::string(as_string_view(*decoded)) == text);
    }
}

TEST_CASE("base64 decoder refuses malformed input") {
    for (std::string bad : {"Zg=", "Zg", "Z===", "Zm9v!", "Zm=v", "Zh==", "====", "Zm9v\n"}) {
        INFO(bad);
        CHECK_FALSE(from_base64(bad).ok());
    }
}
