// Request signatures: the signed message's layout and the header syntax checks.
#include "request_signing.h"

#include <openssl/rand.h>

#include <charconv>
#include <stdexcept>

#include "sha256.h"
#include "text_encoding.h"

namespace tessera::common {

std::string request_signing_message(const RequestClaims& claims) {
    std::string message = "tessera/v1/request";
    message.push_back('\0');
    message += claims.method + "\n" + claims.target + "\n" + claims.client_id + "\n" +
               std::to_string(claims.timestamp) + "\n" + claims.nonce + "\n" + claims.body_sha256;
    return message;
}

SignedHeaders sign_request(std::string_view method, std::string_view target, ByteView body,
                           const std::string& client_id, const SigningKey& key, std::int64_t now) {
    Bytes nonce(kNonceHexLength / 2);
    if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1)
        throw std::runtime_error("the system random generator failed");
    RequestClaims claims{std::string(method), std::string(target), client_id, now, to_hex(nonce), sha256_hex(body)};
    auto signature = key.sign(as_bytes(request_signing_message(claims)));
    return {client_id, std::to_string(now), claims.nonce, to_base64(signature)};
}

Result<RequestClaims> parse_signed_headers(const SignedHeaders& headers, Ed25519Signature& signature) {
    if (headers.client_id.empty() || headers.timestamp.empty() || headers.nonce.empty() || headers.signature.empty())
        return make_error(
            "a signed request needs the Tessera-Client, Tessera-Timestamp, "
            "Tessera-Nonce and Tessera-Signature headers");
    RequestClaims claims;
    claims.client_id = headers.client_id;
    const auto& ts = headers.timestamp;
    auto [end, error] = std::from_chars(ts.data(), ts.data() + ts.size(), claims.timestamp);
    if (error != std::errc() || end != ts.data() + ts.size() || claims.timestamp < 0)
        return make_error("Tessera-Timestamp: expected unix seconds");
    if (!is_lower_hex(headers.nonce, kNonceHexLength))
        return make_error("Tessera-Nonce: expected 32 lowercase hex digits");
    claims.nonce = headers.nonce;
    auto raw = from_base64(headers.signature);
    if (!raw || raw->size() != kEd25519SignatureBytes)
        return make_error("Tessera-Signature: expected a 64-byte Ed25519 signature in base64");
    std::copy(raw->begin(), raw->end(), signature.begin());
    return claims;
}

}  // namespace tessera::common
