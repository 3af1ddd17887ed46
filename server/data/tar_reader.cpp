// The tar reader: header blocks checked one by one, data views bounded by the archive.
#include "tar_reader.h"

#include <algorithm>
#include <optional>
#include <string_view>

namespace tessera::data {
namespace {

using common::make_error;

// Field offsets and widths of a header block (POSIX.1-1988 ustar; GNU shares them).
constexpr std::size_t kNameOffset = 0, kNameBytes = 100;
constexpr std::size_t kSizeOffset = 124, kSizeBytes = 12;
constexpr std::size_t kChecksumOffset = 148, kChecksumBytes = 8;
constexpr std::size_t kTypeOffset = 156;
constexpr std::size_t kMagicOffset = 257;
constexpr std::size_t kPrefixOffset = 345, kPrefixBytes = 155;
constexpr std::string_view kPosixMagic{
    "ustar\0"
    "00",
    8};
constexpr std::string_view kGnuMagic{"ustar  \0", 8};
// pax headers and GNU long names are read whole; a larger one is refused.
constexpr std::uint64_t kMaxExtendedHeaderBytes = 1 << 20;

std::string at(std::size_t offset) { return "tar member at byte " + std::to_string(offset); }

bool all_zero(common::ByteView block) {
    return std::all_of(block.begin(), block.end(), [](std::uint8_t b) { return b == 0; });
}

// A NUL-terminated (or full-width) string field.
std::string field_string(common::ByteView block, std::size_t offset, std::size_t width) {
    auto begin = block.begin() + static_cast<std::ptrdiff_t>(offset);
    auto end = std::find(begin, begin + static_cast<std::ptrdiff_t>(width), std::uint8_t{0});
    return std::string(begin, end);
}

// A numeric field: leading spaces, one or more octal digits, then only NULs and spaces; or
// GNU base-256 (first byte 0x80, the rest big-endian). nullopt for anything else.
std::optional<std::uint64_t> parse_number(common::ByteView field) {
    if (!field.empty() && field[0] == 0x80) {
        std::uint64_t value = 0;
        for (std::size_t i = 1; i < field.size(); ++i) {
            if (value >> 55 != 0) return std::nullopt;  // would pass 2^63
            value = value << 8 | field[i];
        }
        return value;
    }
    std::size_t i = 0;
    while (i < field.size() && field[i] == ' ') ++i;
    std::size_t digits = 0;
    std::uint64_t value = 0;
    for (; i < field.size() && field[i] >= '0' && field[i] <= '7'; ++i, ++digits) value = value * 8 + (field[i] - '0');
    if (digits == 0 || digits > 21) return std::nullopt;  // 8^21 = 2^63
    for (; i < field.size(); ++i)
        if (field[i] != 0 && field[i] != ' ') return std::nullopt;
    return value;
}

// The sum of the header's bytes with the checksum field counted as eight spaces (the
// standard's unsigned sum; some old writers summed signed chars, accepted too).
bool checksum_matches(common::ByteView block, std::uint64_t stored) {
    std::uint64_t unsigned_sum = 0;
    std::int64_t signed_sum = 0;
    for (std::size_t i = 0; i < kTarBlockBytes; ++i) {
        bool in_field = i >= kChecksumOffset && i < kChecksumOffset + kChecksumBytes;
        std::uint8_t b = in_field ? ' ' : block[i];
        unsigned_sum += b;
        signed_sum += static_cast<std::int8_t>(b);
    }
    return stored == unsigned_sum || static_cast<std::int64_t>(stored) == signed_sum;
}

// Applies the records of a pax extended header ("LEN key=value\n", LEN counting the whole
// record in decimal) that matter here: `path` and `size`.
common::Status parse_pax(common::ByteView data, std::optional<std::string>& path, std::optional<std::uint64_t>& size,
                         const std::string& where) {
    auto text = common::as_string_view(data);
    std::size_t pos = 0;
    while (pos < text.size()) {
        if (text[pos] == 0 &&
            std::all_of(text.begin() + static_cast<std::ptrdiff_t>(pos), text.end(), [](char c) { return c == 0; }))
            break;  // padding some writers leave
        std::size_t length = 0, i = pos;
        for (; i < text.size() && text[i] >= '0' && text[i] <= '9' && i - pos < 10; ++i)
            length = length * 10 + (text[i] - '0');
        if (i == pos || i >= text.size() || text[i] != ' ' || length <= i - pos + 1 || length > text.size() - pos)
            return make_error(where + ": malformed pax record");
        auto record = text.substr(i + 1, length - (i - pos) - 1);
        if (record.empty() || record.back() != '\n') return make_error(where + ": pax record not ended by a newline");
        record.remove_suffix(1);
        auto equals = record.find('=');
        if (equals == std::string_view::npos || equals == 0)
            return make_error(where + ": pax record without key=value");
        auto key = record.substr(0, equals), value = record.substr(equals + 1);
        if (key == "path") {
            if (value.find('\0') != std::string_view::npos) return make_error(where + ": pax path holds a NUL");
            path = std::string(value);
        } else if (key == "size") {
            std::uint64_t parsed = 0;
            if (value.empty() || value.size() > 18) return make_error(where + ": pax size is not a decimal number");
            for (char c : value) {
                if (c < '0' || c > '9') return make_error(where + ": pax size is not a decimal number");
                parsed = parsed * 10 + static_cast<std::uint64_t>(c - '0');
            }
            size = parsed;
        }
        pos += length;
    }
    return {};
}

// A member name as webdataset sees it: "./" prefixes dropped; absolute, "..", empty and
// directory-like names refused.
common::Result<std::string> clean_name(std::string name, const std::string& where) {
    while (name.starts_with("./")) name.erase(0, 2);
    if (name.empty()) return make_error(where + ": empty member name");
    if (name.front() == '/') return make_error(where + ": absolute member name \"" + name + "\"");
    if (name.back() == '/') return make_error(where + ": regular file named like a directory \"" + name + "\"");
    std::size_t start = 0;
    while (start <= name.size()) {
        auto end = name.find('/', start);
        if (end == std::string::npos) end = name.size();
        if (name.compare(start, end - start, "..") == 0 && end - start == 2)
            return make_error(where + ": member name \"" + name + "\" holds \"..\"");
        start = end + 1;
    }
    return name;
}

// One header block at `offset` and the data it announces, checked (magic, checksum, size,
// padding).
struct Header {
    common::ByteView block, data;
    std::string where;
    char type = 0;
    bool posix = false, regular = false;
    std::size_t next = 0;  // the offset of the block after its padded data
};

common::Result<Header> read_header(common::ByteView archive, std::size_t offset,
                                   const std::optional<std::uint64_t>& pax_size) {
    Header h;
    h.block = archive.subspan(offset, kTarBlockBytes);
    h.where = at(offset);
    auto magic = common::as_string_view(h.block.subspan(kMagicOffset, kPosixMagic.size()));
    h.posix = magic == kPosixMagic;
    if (!h.posix && magic != kGnuMagic) return make_error(h.where + ": not a ustar or GNU tar header");
    auto checksum = parse_number(h.block.subspan(kChecksumOffset, kChecksumBytes));
    if (!checksum || !checksum_matches(h.block, *checksum)) return make_error(h.where + ": header checksum mismatch");
    auto header_size = parse_number(h.block.subspan(kSizeOffset, kSizeBytes));
    if (!header_size) return make_error(h.where + ": size field is not an octal number");
    h.type = static_cast<char>(h.block[kTypeOffset]);
    std::uint64_t size = *header_size;
    h.regular = h.type == '0' || h.type == '\0' || h.type == '7';
    if (h.regular && pax_size) size = *pax_size;
    offset += kTarBlockBytes;
    if (size > archive.size() - offset)
        return make_error("truncated tar: " + h.where + " claims " + std::to_string(size) + " bytes but " +
                          std::to_string(archive.size() - offset) + " follow");
    h.data = archive.subspan(offset, static_cast<std::size_t>(size));
    auto padded = (size + kTarBlockBytes - 1) / kTarBlockBytes * kTarBlockBytes;
    // The data's last block is padded to 512 bytes; an archive cut inside the padding is truncated.
    if (padded > archive.size() - offset)
        return make_error("truncated tar: " + h.where + "'s data is not padded to a whole block");
    h.next = offset + static_cast<std::size_t>(padded);
    return h;
}

// A long name ('L') or pax header ('x'): what it says of the next member.
common::Status read_extended(const Header& h, std::optional<std::string>& long_name,
                             std::optional<std::uint64_t>& pax_size, const TarLimits& limits) {
    if (h.data.size() > kMaxExtendedHeaderBytes) return make_error(h.where + ": extended header larger than 1 MiB");
    if (h.type == 'L') {
        auto name = common::as_string_view(h.data);
        name = name.substr(0, name.find('\0'));
        long_name = std::string(name);
    } else if (auto ok = parse_pax(h.data, long_name, pax_size, h.where); !ok) {
        return ok;
    }
    if (long_name && long_name->size() > limits.max_name_bytes)
        return make_error(h.where + ": member name longer than " + std::to_string(limits.max_name_bytes) + " bytes");
    return {};
}

// A regular member's name: the long one announced before it, else its header's (with the
// ustar prefix).
std::string member_name(const Header& h, std::optional<std::string>& long_name) {
    if (long_name) return std::move(*long_name);
    auto name = field_string(h.block, kNameOffset, kNameBytes);
    if (h.posix) {
        auto prefix = field_string(h.block, kPrefixOffset, kPrefixBytes);
        if (!prefix.empty()) name = prefix + "/" + name;
    }
    return name;
}

}  // namespace

common::Result<std::vector<TarMember>> read_tar(common::ByteView archive, const TarLimits& limits) {
    std::vector<TarMember> members;
    std::optional<std::string> long_name;   // from 'L' or pax `path`, for the next member
    std::optional<std::uint64_t> pax_size;  // from pax `size`, for the next member
    std::size_t offset = 0;
    for (;;) {
        if (archive.size() - offset < kTarBlockBytes)
            return make_error("truncated tar: " + at(offset) + " has no complete header (the archive has " +
                              std::to_string(archive.size()) + " bytes)");
        if (all_zero(archive.subspan(offset, kTarBlockBytes))) {
            if (long_name || pax_size) return make_error(at(offset) + ": archive ends after an extended header");
            if (archive.size() - offset < 2 * kTarBlockBytes ||
                !all_zero(archive.subspan(offset + kTarBlockBytes, kTarBlockBytes)))
                return make_error("truncated tar: " + at(offset) +
                                  " is one zero block, not the two that end an archive");
            return members;
        }
        auto header = read_header(archive, offset, pax_size);
        if (!header) return header.error();
        const auto& h = *header;
        offset = h.next;
        if (h.type == 'L' || h.type == 'x') {
            if (auto ok = read_extended(h, long_name, pax_size, limits); !ok) return ok.error();
            continue;
        }
        if (h.type == '5' || h.type == 'g' || h.type == 'K') {
            if (h.type == '5') long_name.reset(), pax_size.reset();
            continue;
        }
        if (!h.regular)
            return make_error(h.where + " (\"" + field_string(h.block, kNameOffset, kNameBytes) + "\") has type '" +
                              std::string(1, h.type) + "': only regular files (and directories, skipped) are read");
        auto name = member_name(h, long_name);
        long_name.reset();
        pax_size.reset();
        auto cleaned = clean_name(std::move(name), h.where);
        if (!cleaned) return cleaned.error();
        if (members.size() >= limits.max_members)
            return make_error("tar holds more than " + std::to_string(limits.max_members) + " files");
        members.push_back({std::move(cleaned).value(), h.data});
    }
}

}  // namespace tessera::data
