// Hex and base64 codecs. Decoders are written for untrusted text: every byte is checked.
#include "text_encoding.h"

#include <array>

namespace tessera::common {
namespace {

constexpr std::string_view kHexDigits = "0123456789abcdef";
constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::array<int, 256> make_base64_table() {
    std::array<int, 256> table{};
    table.fill(-1);
    for (std::size_t i = 0; i < kBase64Alphabet.size(); ++i)
        table[static_cast<unsigned char>(kBase64Alphabet[i])] = static_cast<int>(i);
    return table;
}

}  // namespace

std::string to_hex(ByteView bytes) {
    std::string out;
    out.reserve(bytes.size() * 2);
    for (std::uint8_t b : bytes) {
        out.push_back(kHexDigits[b >> 4]);
        out.push_back(kHexDigits[b & 0x0f]);
    }
    return out;
}

Result<Bytes> from_hex(std::string_view text) {
    if (text.size() % 2 != 0) return make_error("hex string has an odd number of digits");
    Bytes out(text.size() / 2);
    for (std::size_t i = 0; i < out.size(); ++i) {
        int hi = hex_value(text[2 * i]);
        int lo = hex_value(text[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return make_error("hex string has a non-hex character at position " +
                              std::to_string(hi < 0 ? 2 * i : 2 * i + 1));
        out[i] = static_cast<std::uint8_t>(hi << 4 | lo);
    }
    return out;
}

bool is_lower_hex(std::string_view text, std::size_t length) {
    if (text.size() != length) return false;
    for (char c : text)
        if (kHexDigits.find(c) == std::string_view::npos) return false;
    return true;
}

std::string to_base64(ByteView bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        std::uint32_t n = bytes[i] << 16 | bytes[i + 1] << 8 | bytes[i + 2];
        out.push_back(kBase64Alphabet[n >> 18 & 63]);
        out.push_back(kBase64Alphabet[n >> 12 & 63]);
        out.push_back(kBase64Alphabet[n >> 6 & 63]);
        out.push_back(kBase64Alphabet[n & 63]);
    }
    std::size_t rest = bytes.size() - i;
    if (rest > 0) {
        std::uint32_t n = bytes[i] << 16 | (rest == 2 ? bytes[i + 1] << 8 : 0);
        out.push_back(kBase64Alphabet[n >> 18 & 63]);
        out.push_back(kBase64Alphabet[n >> 12 & 63]);
        out.push_back(rest == 2 ? kBase64Alphabet[n >> 6 & 63] : '=');
        out.push_back('=');
    }
    return out;
}

Result<Bytes> from_base64(std::string_view text) {
    static const std::array<int, 256> table = make_base64_table();
    if (text.size() % 4 != 0) return make_error("base64 length is not a multiple of 4");
    std::size_t padding = 0;
    if (!text.empty() && text.back() == '=') ++padding;
    if (text.size() >= 2 && text[text.size() - 2] == '=') ++padding;
    Bytes out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        bool last_group = i + 4 == text.size();
        std::uint32_t n = 0;
        for (std::size_t j = 0; j < 4; ++j) {
            char c = text[i + j];
            bool is_pad_slot = last_group && j >= 4 - padding;
            int v = is_pad_slot ? (c == '=' ? 0 : -1) : table[static_cast<unsigned char>(c)];
            if (v < 0) return make_error("base64 has an invalid character at position " + std::to_string(i + j));
            n = n << 6 | static_cast<std::uint32_t>(v);
        }
        out.push_back(static_cast<std::uint8_t>(n >> 16));
        if (!(last_group && padding >= 2)) out.push_back(static_cast<std::uint8_t>(n >> 8 & 0xff));
        if (!(last_group && padding >= 1)) out.push_back(static_cast<std::uint8_t>(n & 0xff));
    }
    // Canonical form only: the bits dropped by padding must be zero.
    if (padding > 0 && to_base64(out) != text) return make_error("base64 is not canonical");
    return out;
}

}  // namespace tessera::common
