// A signed envelope: payload bytes, a detached Ed25519 signature and the signer's key id.
// The signature covers "tessera/v1/<purpose>\0" + payload, so a signature made for one
// purpose (a work unit, say) is never accepted for another. Verify before parsing the payload.
#pragma once

#include <boost/json/value.hpp>

#include <string>
#include <string_view>

#include "ed25519.h"
#include "result.h"

namespace tessera::common {

// JSON form: {"key_id": hex16, "payload": base64, "signature": base64}.
struct SignedEnvelope {
    std::string key_id;
    std::string payload;
    Ed25519Signature signature{};
};

SignedEnvelope seal_envelope(std::string payload, std::string_view purpose, const SigningKey& key);

// The payload, only if `key` signed it for `purpose`; otherwise an error saying why.
Result<std::string> open_envelope(const SignedEnvelope& envelope, std::string_view purpose, const VerifyKey& key);

boost::json::value envelope_to_json(const SignedEnvelope& envelope);
Result<SignedEnvelope> envelope_from_json(const boost::json::value& json, const std::string& path);

}  // namespace tessera::common
