// The .npy reader: version, header length, the header dict parsed by a small strict parser
// (no Python evaluation), and the data length checked against the shape.
#include "npy_reader.h"

#include <array>
#include <cstring>
#include <optional>
#include <string>

namespace tessera::data {
namespace {

using common::make_error;

constexpr std::string_view kMagic{"\x93NUMPY", 6};
// Dimensions above 2^40 are refused before their product is formed.
constexpr std::int64_t kMaxDimension = std::int64_t{1} << 40;

struct TypeInfo {
    NpyType type;
    std::string_view descr;
    std::string_view name;
    std::size_t size;
};

constexpr std::array<TypeInfo, 12> kTypes{{
    {NpyType::Bool, "|b1", "bool", 1},
    {NpyType::U8, "|u1", "uint8", 1},
    {NpyType::I8, "|i1", "int8", 1},
    {NpyType::I16, "<i2", "int16", 2},
    {NpyType::U16, "<u2", "uint16", 2},
    {NpyType::I32, "<i4", "int32", 4},
    {NpyType::U32, "<u4", "uint32", 4},
    {NpyType::I64, "<i8", "int64", 8},
    {NpyType::U64, "<u8", "uint64", 8},
    {NpyType::F16, "<f2", "float16", 2},
    {NpyType::F32, "<f4", "float32", 4},
    {NpyType::F64, "<f8", "float64", 8},
}};

const TypeInfo& info(NpyType type) {
    for (const auto& t : kTypes)
        if (t.type == type) return t;
    return kTypes[0];
}

// A cursor over the header text with the few productions a numpy header uses.
class HeaderParser {
public:
    explicit HeaderParser(std::string_view text) : text_(text) {}

    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
    }
    bool eat(char c) {
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == c) {
            ++pos_;
            return true;
        }
        return false;
    }
    bool peek(char c) {
        skip_space();
        return pos_ < text_.size() && text_[pos_] == c;
    }
    // A quoted string without escapes ('...' or "...").
    std::optional<std::string> string() {
        skip_space();
        if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return std::nullopt;
        char quote = text_[pos_++];
        auto end = text_.find(quote, pos_);
        if (end == std::string_view::npos) return std::nullopt;
        std::string value(text_.substr(pos_, end - pos_));
        if (value.find('\\') != std::string::npos) return std::nullopt;
        pos_ = end + 1;
        return value;
    }
    std::optional<bool> boolean() {
        skip_space();
        for (auto [word, value] :
             {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}})
            if (text_.substr(pos_, word.size()) == word) {
                pos_ += word.size();
                return value;
            }
        return std::nullopt;
    }
    // A decimal integer, at most kMaxDimension.
    std::optional<std::int64_t> dimension() {
        skip_space();
        std::int64_t value = 0;
        std::size_t start = pos_;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
            value = value * 10 + (text_[pos_++] - '0');
            if (value > kMaxDimension) return std::nullopt;
        }
        if (pos_ == start) return std::nullopt;
        return value;
    }
    // "()", "(3,)", "(3, 4)", "(3, 4,)"
    std::optional<std::vector<std::int64_t>> shape() {
        if (!eat('(')) return std::nullopt;
        std::vector<std::int64_t> dims;
        bool comma = false;
        while (!eat(')')) {
            if (!dims.empty() && !comma) return std::nullopt;
            auto d = dimension();
            if (!d || dims.size() == kMaxNpyRank) return std::nullopt;
            dims.push_back(*d);
            comma = eat(',');
        }
        if (dims.size() == 1 && !comma) return std::nullopt;  // "(3)" is an int, not a tuple
        return dims;
    }
    bool at_end() {
        skip_space();
        return pos_ == text_.size();
    }

private:
    std::string_view text_;
    std::size_t pos_ = 0;
};

// The header's text (checked to be printable ASCII, newline removed) and where the data starts.
struct HeaderText {
    std::string_view text;
    std::size_t data_start = 0;
};

common::Result<HeaderText> read_header_text(common::ByteView bytes) {
    if (bytes.size() < kMagic.size() + 2 || common::as_string_view(bytes.subspan(0, kMagic.size())) != kMagic)
        return make_error("not a .npy file (no \\x93NUMPY magic)");
    std::uint8_t major = bytes[6], minor = bytes[7];
    if (major < 1 || major > 3 || minor != 0)
        return make_error(".npy version " + std::to_string(major) + "." + std::to_string(minor) +
                          " is not 1.0, 2.0 or 3.0");
    std::size_t length_bytes = major == 1 ? 2 : 4;
    std::size_t start = 8 + length_bytes;
    if (bytes.size() < start) return make_error(".npy file truncated in its header length");
    std::uint64_t header_length = 0;
    for (std::size_t i = 0; i < length_bytes; ++i) header_length |= std::uint64_t{bytes[8 + i]} << (8 * i);
    if (header_length > kMaxNpyHeaderBytes) return make_error(".npy header longer than 64 KiB");
    if (header_length > bytes.size() - start) return make_error(".npy file truncated in its header");
    auto header = common::as_string_view(bytes.subspan(start, static_cast<std::size_t>(header_length)));
    if (header.empty() || header.back() != '\n') return make_error(".npy header does not end in a newline");
    header.remove_suffix(1);
    for (char c : header)
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
            return make_error(".npy header holds a byte that is not printable ASCII");
    return HeaderText{header, start + static_cast<std::size_t>(header_length)};
}

struct HeaderFields {
    std::string descr;
    std::vector<std::int64_t> shape;
};

// The header's dict: 'descr', 'fortran_order' (False only) and 'shape', each once.
common::Result<HeaderFields> parse_header(std::string_view header) {
    HeaderParser parser(header);
    std::optional<std::string> descr;
    std::optional<bool> fortran;
    std::optional<std::vector<std::int64_t>> shape;
    if (!parser.eat('{')) return make_error(".npy header is not a dict");
    while (!parser.eat('}')) {
        auto key = parser.string();
        if (!key || !parser.eat(':')) return make_error(".npy header: expected 'key': value");
        if (*key == "descr") {
            if (descr) return make_error(".npy header repeats 'descr'");
            if (parser.peek('[')) return make_error(".npy structured dtypes are not supported");
            descr = parser.string();
            if (!descr) return make_error(".npy header: 'descr' is not a string");
        } else if (*key == "fortran_order") {
            if (fortran) return make_error(".npy header repeats 'fortran_order'");
            fortran = parser.boolean();
            if (!fortran) return make_error(".npy header: 'fortran_order' is not True or False");
        } else if (*key == "shape") {
            if (shape) return make_error(".npy header repeats 'shape'");
            shape = parser.shape();
            if (!shape)
                return make_error(".npy header: 'shape' is not a tuple of at most 8 dimensions, each at most 2^40");
        } else {
            return make_error(".npy header has an unknown key '" + *key + "'");
        }
        if (!parser.eat(',') && !parser.peek('}')) return make_error(".npy header: expected ',' or '}'");
    }
    if (!parser.at_end()) return make_error(".npy header has text after its dict");
    if (!descr || !fortran || !shape) return make_error(".npy header lacks 'descr', 'fortran_order' or 'shape'");
    if (*fortran) return make_error(".npy array is in Fortran order; save a C-ordered array");
    return HeaderFields{std::move(*descr), std::move(*shape)};
}

}  // namespace

std::int64_t NpyArray::numel() const {
    // parse_npy checked the product against the data's length; a zero dimension first.
    for (auto d : shape)
        if (d == 0) return 0;
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string_view npy_type_name(NpyType type) { return info(type).name; }
std::string_view npy_descr(NpyType type) { return info(type).descr; }
std::size_t npy_type_size(NpyType type) { return info(type).size; }

common::Result<NpyArray> parse_npy(common::ByteView bytes) {
    auto header = read_header_text(bytes);
    if (!header) return header.error();
    auto fields = parse_header(header->text);
    if (!fields) return fields.error();

    NpyArray array;
    const TypeInfo* type = nullptr;
    for (const auto& t : kTypes)
        if (t.descr == fields->descr) type = &t;
    if (type == nullptr)
        return make_error(".npy dtype '" + fields->descr +
                          "' is not supported (little-endian bool, integer or float only)");
    array.type = type->type;
    array.shape = std::move(fields->shape);
    // The product is formed only while it stays below 2^62, so it cannot overflow.
    auto data = bytes.subspan(header->data_start);
    std::uint64_t expected = type->size;
    bool too_long = false;
    for (auto d : array.shape)
        if (d == 0) expected = 0;
    for (auto d : array.shape) {
        if (expected == 0) break;
        if (expected > (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(d)) {
            too_long = true;
            break;
        }
        expected *= static_cast<std::uint64_t>(d);
    }
    if (too_long || expected != data.size())
        return make_error(".npy data holds " + std::to_string(data.size()) + " bytes but its shape and dtype need " +
                          (too_long ? "more than 2^62" : std::to_string(expected)));
    array.data = data;
    return array;
}

}  // namespace tessera::data
