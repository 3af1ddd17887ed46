// The zip reader: the central directory is the index; each member is inflated under its
// declared size and checked against its CRC-32.
#include "zip_reader.h"

#include <zlib.h>

#include <limits>
#include <set>

namespace tessera::data {
namespace {

using common::make_error;

constexpr std::uint32_t kEndSignature = 0x06054b50;
constexpr std::uint32_t kCentralSignature = 0x02014b50;
constexpr std::uint32_t kLocalSignature = 0x04034b50;
constexpr std::size_t kEndBytes = 22;
constexpr std::size_t kCentralBytes = 46;
constexpr std::size_t kLocalBytes = 30;
constexpr std::size_t kMaxCommentBytes = 0xFFFF;
constexpr std::uint32_t kZip64Marker = 0xFFFFFFFF;
constexpr std::uint16_t kMethodStored = 0, kMethodDeflate = 8;
constexpr std::uint16_t kFlagEncrypted = 1;

std::uint32_t u16(common::ByteView b, std::size_t at) { return b[at] | std::uint32_t{b[at + 1]} << 8; }
std::uint32_t u32(common::ByteView b, std::size_t at) { return u16(b, at) | u16(b, at + 2) << 16; }

struct CentralEntry {
    std::string name;
    std::uint16_t method = 0;
    std::uint32_t crc = 0, packed_size = 0, size = 0, local_offset = 0;
};

common::Result<common::Bytes> inflate_member(common::ByteView packed, std::uint32_t size, const std::string& name) {
    common::Bytes out(size);
    z_stream stream{};
    if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) return make_error("zip: zlib could not start inflating");
    stream.next_in = const_cast<Bytef*>(packed.data());
    stream.avail_in = static_cast<uInt>(packed.size());
    // One spare byte so that data past the declared size shows as output, not as a full buffer.
    Bytef spare = 0;
    stream.next_out = size > 0 ? out.data() : &spare;
    stream.avail_out = size > 0 ? size : 1;
    int rc = inflate(&stream, Z_FINISH);
    bool exact = rc == Z_STREAM_END && stream.total_out == size && stream.avail_in == 0;
    inflateEnd(&stream);
    if (!exact) return make_error("zip member \"" + name + "\": deflate data is corrupt or does not match its size");
    return out;
}

// Where the central directory lies, from the end record: scanning back from the end, the first
// signature whose comment length reaches exactly the end of the archive.
struct Directory {
    std::uint32_t entries = 0, size = 0, offset = 0;
};

common::Result<Directory> read_end_record(common::ByteView archive, const ZipLimits& limits) {
    std::size_t end = archive.size() - kEndBytes;
    std::size_t lowest =
        archive.size() > kEndBytes + kMaxCommentBytes ? archive.size() - kEndBytes - kMaxCommentBytes : 0;
    bool found = false;
    for (std::size_t at = end + 1; at-- > lowest;)
        if (u32(archive, at) == kEndSignature && at + kEndBytes + u16(archive, at + 20) == archive.size()) {
            end = at;
            found = true;
            break;
        }
    if (!found) return make_error("zip: no end-of-central-directory record (not a zip, or truncated)");
    if (u16(archive, end + 4) != 0 || u16(archive, end + 6) != 0)
        return make_error("zip: multi-disk archives are not supported");
    Directory d{u16(archive, end + 10), u32(archive, end + 12), u32(archive, end + 16)};
    if (u16(archive, end + 8) != d.entries) return make_error("zip: entry counts disagree");
    if (d.entries == 0xFFFF || d.size == kZip64Marker || d.offset == kZip64Marker)
        return make_error("zip: zip64 archives are not supported");
    if (d.entries > limits.max_members)
        return make_error("zip: more than " + std::to_string(limits.max_members) + " members");
    if (d.offset > end || d.size > end - d.offset) return make_error("zip: central directory lies outside the archive");
    return d;
}

// Central directory entry `i` at `at` (moved past it), checked for what this reader supports.
common::Result<CentralEntry> read_central_entry(common::ByteView archive, std::size_t& at, std::size_t directory_end,
                                                std::uint32_t i) {
    if (directory_end - at < kCentralBytes || u32(archive, at) != kCentralSignature)
        return make_error("zip: central directory entry " + std::to_string(i) + " is malformed");
    CentralEntry e;
    auto flags = u16(archive, at + 8);
    e.method = static_cast<std::uint16_t>(u16(archive, at + 10));
    e.crc = u32(archive, at + 16);
    e.packed_size = u32(archive, at + 20);
    e.size = u32(archive, at + 24);
    std::size_t name_bytes = u16(archive, at + 28), extra_bytes = u16(archive, at + 30),
                comment_bytes = u16(archive, at + 32);
    if (u16(archive, at + 34) != 0) return make_error("zip: multi-disk archives are not supported");
    e.local_offset = u32(archive, at + 42);
    std::size_t variable = name_bytes + extra_bytes + comment_bytes;
    if (directory_end - at - kCentralBytes < variable)
        return make_error("zip: central directory entry " + std::to_string(i) + " runs past the directory");
    e.name = std::string(common::as_string_view(archive.subspan(at + kCentralBytes, name_bytes)));
    at += kCentralBytes + variable;
    if (e.name.empty() || e.name.find('\0') != std::string::npos)
        return make_error("zip: member " + std::to_string(i) + " has an empty or invalid name");
    if ((flags & kFlagEncrypted) != 0) return make_error("zip member \"" + e.name + "\" is encrypted");
    if (e.method != kMethodStored && e.method != kMethodDeflate)
        return make_error("zip member \"" + e.name + "\" uses compression method " + std::to_string(e.method) +
                          " (only stored and deflate are read)");
    if (e.packed_size == kZip64Marker || e.size == kZip64Marker || e.local_offset == kZip64Marker)
        return make_error("zip member \"" + e.name + "\" needs zip64, which is not supported");
    if (e.method == kMethodStored && e.packed_size != e.size)
        return make_error("zip member \"" + e.name + "\" is stored but its sizes differ");
    return e;
}

// The member `e` names, from its local header (which must agree), inflated and CRC-checked.
common::Result<ZipMember> read_member(common::ByteView archive, const CentralEntry& e, std::size_t directory_offset) {
    std::size_t local = e.local_offset;
    if (local > directory_offset || directory_offset - local < kLocalBytes || u32(archive, local) != kLocalSignature)
        return make_error("zip member \"" + e.name + "\": local header missing or outside the archive");
    std::size_t name_bytes = u16(archive, local + 26), extra_bytes = u16(archive, local + 28);
    std::size_t data_at = local + kLocalBytes + name_bytes + extra_bytes;
    if (data_at > directory_offset || e.packed_size > directory_offset - data_at)
        return make_error("zip member \"" + e.name + "\": data runs past the central directory");
    if (common::as_string_view(archive.subspan(local + kLocalBytes, name_bytes)) != e.name)
        return make_error("zip member \"" + e.name + "\": local header names another file");
    auto packed = archive.subspan(data_at, e.packed_size);
    ZipMember member{e.name, {}};
    if (e.method == kMethodStored) {
        member.data.assign(packed.begin(), packed.end());
    } else {
        auto inflated = inflate_member(packed, e.size, e.name);
        if (!inflated) return inflated.error();
        member.data = std::move(inflated).value();
    }
    auto crc = crc32(0, member.data.data(), static_cast<uInt>(member.data.size()));
    if (crc != e.crc) return make_error("zip member \"" + e.name + "\": CRC-32 mismatch");
    return member;
}

}  // namespace

common::Result<std::vector<ZipMember>> read_zip(common::ByteView archive, const ZipLimits& limits) {
    if (archive.size() < kEndBytes) return make_error("zip: too short to be an archive");
    if (archive.size() > std::numeric_limits<std::uint32_t>::max())
        return make_error("zip: archives of 4 GiB or more (zip64) are not supported");
    auto directory = read_end_record(archive, limits);
    if (!directory) return directory.error();
    std::vector<CentralEntry> central;
    std::set<std::string> names;
    std::size_t at = directory->offset, directory_end = std::size_t{directory->offset} + directory->size;
    for (std::uint32_t i = 0; i < directory->entries; ++i) {
        auto entry = read_central_entry(archive, at, directory_end, i);
        if (!entry) return entry.error();
        if (!names.insert(entry->name).second) return make_error("zip: member \"" + entry->name + "\" appears twice");
        central.push_back(std::move(entry).value());
    }
    if (at != directory_end) return make_error("zip: central directory size does not match its entries");

    std::uint64_t total = 0;
    std::vector<ZipMember> members;
    for (const auto& e : central) {
        total += e.size;
        if (total > limits.max_total_bytes)
            return make_error("zip: members decompress to more than " + std::to_string(limits.max_total_bytes) +
                              " bytes");
        auto member = read_member(archive, e, directory->offset);
        if (!member) return member.error();
        members.push_back(std::move(member).value());
    }
    return members;
}

}  // namespace tessera::data
