// GET/HEAD /blobs/<sha256>: content-addressed files with ETag (the hash), single byte ranges
// (206, or 416 when unsatisfiable), If-None-Match (304) and `Cache-Control: immutable`, so
// any HTTP cache can hold them forever.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "blob_store.h"
#include "http_types.h"
#include "result.h"

namespace tessera::server {

struct ByteRange {
    std::uint64_t first = 0;
    std::uint64_t last = 0;  // inclusive
};

// Parses a Range header ("bytes=A-B", "bytes=A-", "bytes=-N") against a file of `size` bytes.
// nullopt: no usable range (serve the whole file); an Error: unsatisfiable (416).
common::Result<std::optional<ByteRange>> parse_byte_range(std::string_view header, std::uint64_t size);

Response serve_blob(const Request& request, const BlobStore& blobs, std::string_view sha256);

}  // namespace tessera::server
