// Signed API requests (docs/protocol.md, "Request signing"): a volunteer signs the method,
// target, its client id, a timestamp, a nonce and the body's SHA-256 with its Ed25519 key.
// The server checks the signature, refuses timestamps outside a window and nonces it has seen.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "bytes.h"
#include "ed25519.h"
#include "result.h"

namespace tessera::common {

constexpr std::string_view kHeaderClient = "Tessera-Client";
constexpr std::string_view kHeaderTimestamp = "Tessera-Timestamp";
constexpr std::string_view kHeaderNonce = "Tessera-Nonce";
constexpr std::string_view kHeaderSignature = "Tessera-Signature";
constexpr std::size_t kNonceHexLength = 32;  // 16 random bytes

// What a request signature covers.
struct RequestClaims {
    std::string method;  // "POST"
    std::string target;  // "/api/v1/work" (path and query, as sent)
    std::string client_id;
    std::int64_t timestamp = 0;  // unix seconds
    std::string nonce;           // 32 lowercase hex digits
    std::string body_sha256;
};

// The four header values of a signed request.
struct SignedHeaders {
    std::string client_id;
    std::string timestamp;
    std::string nonce;
    std::string signature;  // base64
};

// "tessera/v1/request\0" + method \n target \n client_id \n timestamp \n nonce \n body_sha256.
std::string request_signing_message(const RequestClaims& claims);

// Signs a request with a fresh random nonce.
SignedHeaders sign_request(std::string_view method, std::string_view target, ByteView body,
                           const std::string& client_id, const SigningKey& key, std::int64_t now);

// Reads the headers' values into claims (the body hash is computed by the caller) and checks
// their syntax; the signature's bytes go to `signature`.
Result<RequestClaims> parse_signed_headers(const SignedHeaders& headers, Ed25519Signature& signature);

}  // namespace tessera::common
