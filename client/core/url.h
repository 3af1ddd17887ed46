// http(s) URLs as the client needs them: scheme, host, port and the path prefix.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "result.h"

namespace tessera::client {

struct Url {
    bool tls = false;
    std::string host;
    std::uint16_t port = 80;
    std::string path;            // "" or "/prefix" (no trailing slash)
    std::string origin() const;  // "https://host:port"
};

// Accepts "http://host[:port][/path]" and "https://…"; a trailing slash is dropped.
common::Result<Url> parse_url(std::string_view text);

}  // namespace tessera::client
