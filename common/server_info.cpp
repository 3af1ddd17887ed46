// ServerInfo's JSON, read strictly like every message of the protocol.
#include "server_info.h"

#include <boost/json.hpp>

#include "ed25519.h"
#include "json_strict.h"
#include "text_encoding.h"
#include "version_number.h"

namespace tessera::common {
namespace {

std::string read_version(JsonObjectReader& reader, std::string_view key, bool may_be_empty) {
    auto text = reader.string(key, 0, 32);
    if (reader.failed() || (may_be_empty && text.empty())) return text;
    if (!parse_version(text)) reader.fail("field \"" + std::string(key) + "\": expected a version such as 1.2.3");
    return text;
}

}  // namespace

boost::json::value to_json(const ServerInfo& info) {
    return {{"version", info.version},
            {"server_public_key", info.server_public_key},
            {"server_key_id", info.server_key_id},
            {"time", info.time},
            {"request_window_s", info.request_window_s},
            {"min_client_version", info.min_client_version},
            {"recommended_client_version", info.recommended_client_version}};
}

Result<ServerInfo> parse_server_info(std::string_view text) {
    auto json = parse_json_strict(text);
    if (!json) return json.error();
    JsonObjectReader reader(*json, "server_info");
    ServerInfo info;
    info.version = read_version(reader, "version", false);
    info.server_public_key =
        reader.string("server_public_key", kEd25519PublicKeyBase64Length, kEd25519PublicKeyBase64Length);
    if (!reader.failed()) {
        auto raw = from_base64(info.server_public_key);
        if (!raw || raw->size() != kEd25519PublicKeyBytes)
            reader.fail("field \"server_public_key\": expected a 32-byte key in base64");
    }
    info.server_key_id = reader.lower_hex("server_key_id", kKeyIdHexLength);
    info.time = reader.integer("time", 0, std::int64_t{1} << 40);
    info.request_window_s = reader.integer("request_window_s", 1, 86400);
    info.min_client_version = read_version(reader, "min_client_version", true);
    info.recommended_client_version = read_version(reader, "recommended_client_version", true);
    if (auto status = reader.finish(); !status) return status.error();
    return info;
}

}  // namespace tessera::common
