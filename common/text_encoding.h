// Hex and base64 (RFC 4648, padded) encodings; decoders are strict and reject anything else.
#pragma once

#include <string>
#include <string_view>

#include "bytes.h"
#include "result.h"

namespace tessera::common {

std::string to_hex(ByteView bytes);
Result<Bytes> from_hex(std::string_view text);
// True when `text` is exactly `length` lowercase hex digits.
bool is_lower_hex(std::string_view text, std::size_t length);

std::string to_base64(ByteView bytes);
Result<Bytes> from_base64(std::string_view text);

}  // namespace tessera::common
