// PNG: signature, IHDR, one zlib-compressed IDAT (filter 0 per row), IEND; CRCs from zlib.
#include "png.h"

#include <zlib.h>

#include <string_view>

namespace tessera::common {
namespace {

void put_u32(Bytes& out, std::uint32_t value) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<std::uint8_t>(value >> shift));
}

void put_chunk(Bytes& out, std::string_view type, const Bytes& data) {
    put_u32(out, static_cast<std::uint32_t>(data.size()));
    auto type_start = out.size();
    out.insert(out.end(), type.begin(), type.end());
    out.insert(out.end(), data.begin(), data.end());
    auto crc = crc32(0, out.data() + type_start, static_cast<uInt>(out.size() - type_start));
    put_u32(out, static_cast<std::uint32_t>(crc));
}

}  // namespace

Result<Bytes> encode_png_gray(std::uint32_t width, std::uint32_t height, ByteView pixels) {
    if (width == 0 || height == 0 || static_cast<std::uint64_t>(width) * height != pixels.size())
        return make_error("PNG: pixel count does not match width × height");
    Bytes raw;
    raw.reserve(static_cast<std::size_t>(height) * (width + 1));
    for (std::uint32_t y = 0; y < height; ++y) {
        raw.push_back(0);  // filter type: none
        auto row = pixels.subspan(static_cast<std::size_t>(y) * width, width);
        raw.insert(raw.end(), row.begin(), row.end());
    }
    uLongf packed_size = compressBound(static_cast<uLong>(raw.size()));
    Bytes packed(packed_size);
    if (compress2(packed.data(), &packed_size, raw.data(), static_cast<uLong>(raw.size()), 9) != Z_OK)
        return make_error("PNG: zlib compression failed");
    packed.resize(packed_size);

    Bytes out{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    Bytes header;
    put_u32(header, width);
    put_u32(header, height);
    header.insert(header.end(), {8, 0, 0, 0, 0});  // 8-bit, greyscale, deflate, filter 0, no interlace
    put_chunk(out, "IHDR", header);
    put_chunk(out, "IDAT", packed);
    put_chunk(out, "IEND", {});
    return out;
}

}  // namespace tessera::common
