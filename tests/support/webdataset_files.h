// Writers of the files `tessera-data import` reads from webdataset tars — tar archives, .npy
// arrays and .npz (zip) archives — byte by byte, for reader tests and fuzz seeds. Header-only,
// no torch. They write what Python's tarfile and numpy.save write, plus what tests ask for.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::testing {

using FileBytes = std::vector<std::uint8_t>;

inline FileBytes bytes_of(std::string_view text) { return FileBytes(text.begin(), text.end()); }

// A .npy file: version `major`.0 with `header` as the dict text (padded to 64 bytes and ended
// with '\n' as numpy does), then `data`.
inline FileBytes npy_raw(const std::string& header, const FileBytes& data, int major = 1) {
    std::size_t length_bytes = major == 1 ? 2 : 4;
    std::string text = header;
    std::size_t prefix = 8 + length_bytes;
    text.append((64 - (prefix + text.size() + 1) % 64) % 64, ' ');
    text += '\n';
    FileBytes out = bytes_of("\x93NUMPY");
    out.push_back(static_cast<std::uint8_t>(major));
    out.push_back(0);
    for (std::size_t i = 0; i < length_bytes; ++i) out.push_back(static_cast<std::uint8_t>(text.size() >> (8 * i)));
    out.insert(out.end(), text.begin(), text.end());
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

inline std::string npy_shape(const std::vector<std::int64_t>& shape) {
    std::string out = "(";
    for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
    return out + (shape.size() == 1 ? ",)" : ")");
}

// A C-ordered array as numpy.save writes it.
template <class T>
FileBytes npy(std::string_view descr, const std::vector<std::int64_t>& shape, const std::vector<T>& values) {
    FileBytes data(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(data.data(), values.data(), data.size());
    return npy_raw(
        "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + npy_shape(shape) + ", }", data);
}

struct TarEntry {
    std::string name;
    FileBytes data;
    char type = '0';
};

// One 512-byte header block. `gnu` writes GNU's magic; the name goes in the name field (cut at
// 100 bytes: tar() writes an 'L' entry before longer names).
inline FileBytes tar_header(const std::string& name, std::uint64_t size, char type, bool gnu) {
    FileBytes block(512, 0);
    std::memcpy(block.data(), name.data(), std::min<std::size_t>(name.size(), 100));
    auto octal = [&](std::size_t at, std::size_t width, std::uint64_t value) {
        std::snprintf(reinterpret_cast<char*>(block.data() + at), width, "%0*llo", static_cast<int>(width - 1),
                      static_cast<unsigned long long>(value));
    };
    octal(100, 8, 0644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, size);
    octal(136, 12, 1700000000);
    block[156] = static_cast<std::uint8_t>(type);
    std::memcpy(block.data() + 257,
                gnu ? "ustar  \0"
                    : "ustar\0"
                      "00",
                8);
    std::memset(block.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (auto b : block) sum += b;
    std::snprintf(reinterpret_cast<char*>(block.data() + 148), 8, "%06o", sum);
    block[155] = ' ';
    return block;
}

inline void tar_append(FileBytes& out, const std::string& name, const FileBytes& data, char type, bool gnu) {
    auto header = tar_header(name, data.size(), type, gnu);
    out.insert(out.end(), header.begin(), header.end());
    out.insert(out.end(), data.begin(), data.end());
    out.resize((out.size() + 511) / 512 * 512, 0);
}

// A tar of `entries` in order, ended by two zero blocks; names past 100 bytes get a GNU 'L'
// entry first.
inline FileBytes tar(const std::vector<TarEntry>& entries, bool gnu = false) {
    FileBytes out;
    for (const auto& e : entries) {
        if (e.name.size() > 100) {
            FileBytes long_name(e.name.begin(), e.name.end());
            long_name.push_back(0);
            tar_append(out, "././@LongLink", long_name, 'L', true);
        }
        tar_append(out, e.name, e.data, e.type, gnu);
    }
    out.resize(out.size() + 1024, 0);
    return out;
}

// A pax record "LEN key=value\n".
inline std::string pax_record(const std::string& key, const std::string& value) {
    std::size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
    std::size_t length = body + std::to_string(body).size();
    if (std::to_string(length).size() != std::to_string(body).size()) ++length;
    return std::to_string(length) + " " + key + "=" + value + "\n";
}

// A zip of `members` (stored, or deflated with zlib), as numpy.savez and savez_compressed write.
inline FileBytes zip(const std::vector<std::pair<std::string, FileBytes>>& members, bool deflated) {
    FileBytes out, directory;
    auto u16 = [](FileBytes& b, std::uint32_t v) {
        b.push_back(static_cast<std::uint8_t>(v));
        b.push_back(static_cast<std::uint8_t>(v >> 8));
    };
    auto u32 = [&](FileBytes& b, std::uint32_t v) {
        u16(b, v & 0xffff);
        u16(b, v >> 16);
    };
    for (const auto& [name, data] : members) {
        FileBytes packed = data;
        if (deflated) {
            z_stream s{};
            deflateInit2(&s, 6, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
            packed.resize(deflateBound(&s, static_cast<uLong>(data.size())));
            s.next_in = const_cast<Bytef*>(data.data());
            s.avail_in = static_cast<uInt>(data.size());
            s.next_out = packed.data();
            s.avail_out = static_cast<uInt>(packed.size());
            ::deflate(&s, Z_FINISH);
            packed.resize(s.total_out);
            deflateEnd(&s);
        }
        auto crc = static_cast<std::uint32_t>(crc32(0, data.data(), static_cast<uInt>(data.size())));
        auto offset = static_cast<std::uint32_t>(out.size());
        auto header = [&](FileBytes& b, bool central) {
            u32(b, central ? 0x02014b50 : 0x04034b50);
            if (central) u16(b, 20);
            u16(b, 20);
            u16(b, 0);
            u16(b, deflated ? 8 : 0);
            u32(b, 0);
            u32(b, crc);
            u32(b, static_cast<std::uint32_t>(packed.size()));
            u32(b, static_cast<std::uint32_t>(data.size()));
            u16(b, static_cast<std::uint32_t>(name.size()));
            u16(b, 0);
            if (central) {
                u16(b, 0);
                u16(b, 0);
                u16(b, 0);
                u32(b, 0);
                u32(b, offset);
            }
            b.insert(b.end(), name.begin(), name.end());
        };
        header(out, false);
        out.insert(out.end(), packed.begin(), packed.end());
        header(directory, true);
    }
    auto directory_offset = static_cast<std::uint32_t>(out.size());
    out.insert(out.end(), directory.begin(), directory.end());
    u32(out, 0x06054b50);
    u16(out, 0);
    u16(out, 0);
    u16(out, static_cast<std::uint32_t>(members.size()));
    u16(out, static_cast<std::uint32_t>(members.size()));
    u32(out, static_cast<std::uint32_t>(directory.size()));
    u32(out, directory_offset);
    u16(out, 0);
    return out;
}

}  // namespace tessera::testing
