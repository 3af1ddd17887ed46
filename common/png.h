// A minimal PNG encoder for 8-bit greyscale images (sample grids for the dashboard and docs).
#pragma once

#include <cstdint>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

// `pixels` is row-major, width × height bytes.
Result<Bytes> encode_png_gray(std::uint32_t width, std::uint32_t height, ByteView pixels);

}  // namespace tessera::common
