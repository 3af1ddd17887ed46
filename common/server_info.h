// GET /api/v1/server (docs/protocol.md): what a volunteer (and `tessera-client doctor`) checks
// before working for a server: its key, its clock, its version and the client versions it
// asks for.
#pragma once

#include <boost/json/value.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "result.h"

namespace tessera::common {

struct ServerInfo {
    std::string version;                     // the server's release, "0.1.0"
    std::string server_public_key;           // base64 of the raw 32-byte Ed25519 key
    std::string server_key_id;               // 16 lowercase hex digits
    std::int64_t time = 0;                   // the server's clock, unix seconds
    std::int64_t request_window_s = 0;       // a signed request's timestamp must be this close
    std::string min_client_version;          // "" or a version: older clients are refused
    std::string recommended_client_version;  // "" or a version: older clients are told to update
};

boost::json::value to_json(const ServerInfo& info);
Result<ServerInfo> parse_server_info(std::string_view text);

}  // namespace tessera::common
