// A reader of small zip archives held in memory (numpy's .npz), for untrusted bytes: stored
// and deflated members, every offset and size checked, CRC-32 verified. No I/O, no torch.
//
// Layout read: the end-of-central-directory record (signature 0x06054b50, found from the end,
// its comment reaching exactly the end of the archive) gives the central directory's offset,
// size and entry count; each central entry (0x02014b50) gives a member's method, CRC-32,
// sizes, name and local header offset; the local header (0x04034b50) must carry the same name,
// and the member's data follows it. Methods 0 (stored) and 8 (deflate, inflated by zlib to
// exactly the declared size) only; multi-disk, encrypted and zip64 archives (sizes or offsets
// of 0xFFFFFFFF, which numpy writes only past 4 GiB) are refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bytes.h"
#include "result.h"

namespace tessera::data {

struct ZipLimits {
    std::size_t max_members = 256;
    std::uint64_t max_total_bytes = std::uint64_t{1} << 30;  // uncompressed, all members together
};

struct ZipMember {
    std::string name;
    common::Bytes data;  // uncompressed
};

// The members in central-directory order, decompressed and CRC-checked.
common::Result<std::vector<ZipMember>> read_zip(common::ByteView archive, const ZipLimits& limits = {});

}  // namespace tessera::data
