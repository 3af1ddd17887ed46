// IDX parsing over zlib's gzread, which reads gzip and plain files alike.
#include "bytes.h"
#include "idx_file.h"

#include <zlib.h>

namespace tessera::data {
namespace {

constexpr std::uint64_t kMaxIdxBytes = 256 * common::kMiB;
constexpr std::uint8_t kUnsignedByte = 0x08;

}  // namespace

common::Result<IdxArray> read_idx_file(const std::filesystem::path& path) {
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) return common::make_error("cannot open " + path.string());
    common::Bytes raw;
    std::uint8_t chunk[1 << 16];
    int n = 0;
    while ((n = gzread(file, chunk, sizeof chunk)) > 0) {
        raw.insert(raw.end(), chunk, chunk + n);
        if (raw.size() > kMaxIdxBytes) break;
    }
    int closed = gzclose(file);
    if (n < 0 || closed != Z_OK) return common::make_error(path.string() + ": corrupt gzip data");
    if (raw.size() > kMaxIdxBytes)
        return common::make_error(path.string() + ": larger than " + std::to_string(kMaxIdxBytes >> 20) + " MiB");
    if (raw.size() < 4 || raw[0] != 0 || raw[1] != 0 || raw[2] != kUnsignedByte || raw[3] == 0 || raw[3] > 4)
        return common::make_error(path.string() + ": not an IDX file of unsigned bytes");

    IdxArray array;
    std::size_t rank = raw[3];
    if (raw.size() < 4 + 4 * rank) return common::make_error(path.string() + ": truncated IDX header");
    std::uint64_t count = 1;
    for (std::size_t i = 0; i < rank; ++i) {
        const std::uint8_t* p = raw.data() + 4 + 4 * i;
        std::uint64_t dim = std::uint64_t{p[0]} << 24 | std::uint64_t{p[1]} << 16 | std::uint64_t{p[2]} << 8 | p[3];
        count *= dim;  // each dim < 2^32 and rank <= 4, but stop early past the limit
        if (count > kMaxIdxBytes) return common::make_error(path.string() + ": IDX dimensions exceed the limit");
        array.dims.push_back(static_cast<std::int64_t>(dim));
    }
    std::size_t offset = 4 + 4 * rank;
    if (raw.size() - offset != count)
        return common::make_error(path.string() + ": IDX header promises " + std::to_string(count) +
                                  " values but the file holds " + std::to_string(raw.size() - offset));
    array.values.assign(raw.begin() + static_cast<std::ptrdiff_t>(offset), raw.end());
    return array;
}

}  // namespace tessera::data
