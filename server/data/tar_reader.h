// A reader of tar archives held in memory (webdataset shards), for untrusted bytes: POSIX
// ustar and GNU tar, regular files only, every field and length checked. No I/O, no torch.
//
// Layout: 512-byte blocks. Each member is a header block (name[100] at 0, size[12] at 124,
// chksum[8] at 148, typeflag at 156, magic[6] at 257, version[2] at 263, ustar prefix[155] at
// 345) followed by its data padded to a whole block; the archive ends with two zero blocks.
// Accepted: magic "ustar\0" + "00" (POSIX, whose prefix is joined to the name) or "ustar " +
// " \0" (GNU); size and checksum fields in octal (leading spaces, then digits, then NUL or
// space) or, for size, GNU base-256; the checksum is the sum of the header's bytes with its
// own field read as spaces. Types: '0' and '\0' (and '7', contiguous) are files; '5'
// (directories), 'g' (pax global headers) and 'K' (GNU long link names) are skipped; 'L' (GNU
// long name) and 'x' (pax extended header: "LEN key=value\n" records, of which `path` and
// `size` apply to the next member) name the member after them; any other type (links,
// devices, fifos, sparse files) is refused. Names lose a leading "./" and are refused when
// empty, absolute, ending in '/', or holding a ".." component. See docs/dataset_format.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

inline constexpr std::size_t kTarBlockBytes = 512;

struct TarLimits {
    std::size_t max_members = std::size_t{1} << 22;  // regular files
    std::size_t max_name_bytes = 4096;               // from 'L' or pax `path`
};

// A regular file of the archive: its name and a view of its data inside the archive's bytes.
struct TarMember {
    std::string name;
    common::ByteView data;
};

// The archive's regular files in archive order. Named errors (with the member's byte offset)
// for a truncated archive, a bad checksum or field, an unsupported member type or name.
common::Result<std::vector<TarMember>> read_tar(common::ByteView archive, const TarLimits& limits = {});

}  // namespace tessera::data
