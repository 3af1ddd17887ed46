// Volunteer request signatures and the operator token.
#include "request_auth.h"

#include <openssl/crypto.h>

#include "ed25519.h"
#include "request_signing.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::server {
namespace {

AuthFailure unauthorized(std::string message) {
    return {http::status::unauthorized, "unauthorized", std::move(message)};
}

std::string header(const http::request_header<>& request, std::string_view name) {
    auto it = request.find(boost::beast::string_view(name.data(), name.size()));
    return it == request.end() ? std::string() : std::string(it->value());
}

AuthFailure banned() { return {http::status::forbidden, "banned", "this volunteer is banned"}; }

// The signing headers' claims, checked against the clock, and the client they name.
struct Signer {
    common::RequestClaims claims;
    common::Ed25519Signature signature{};
    ClientRecord client;
};

std::variant<Signer, AuthFailure> signer_of(const http::request_header<>& request, ClientStore& clients,
                                            std::int64_t now) {
    common::SignedHeaders headers{header(request, common::kHeaderClient), header(request, common::kHeaderTimestamp),
                                  header(request, common::kHeaderNonce), header(request, common::kHeaderSignature)};
    Signer signer;
    auto claims = common::parse_signed_headers(headers, signer.signature);
    if (!claims) return unauthorized(claims.message());
    if (claims->timestamp < now - kRequestWindowS || claims->timestamp > now + kRequestWindowS)
        return unauthorized("Tessera-Timestamp is more than " + std::to_string(kRequestWindowS) +
                            " s from the server's clock");
    auto client = clients.client(claims->client_id);
    if (!client) return AuthFailure{http::status::internal_server_error, "internal", client.message()};
    if (!*client) return unauthorized("unknown client '" + claims->client_id + "'; register first");
    signer.claims = std::move(*claims);
    signer.client = std::move(**client);
    return signer;
}

}  // namespace

Response refusal_response(const Request& reply_to, const AuthFailure& failure) {
    if (failure.status == http::status::internal_server_error) return internal_error(reply_to, failure.message);
    return error_response(reply_to, failure.status, failure.code, failure.message);
}

std::variant<ClientRecord, AuthFailure> authenticate(const Request& request, ClientStore& clients, std::int64_t now) {
    return authenticate(request.base(), common::sha256_hex(request.body()), clients, now);
}

std::variant<ClientRecord, AuthFailure> authenticate(const http::request_header<>& request,
                                                     const std::string& body_sha256, ClientStore& clients,
                                                     std::int64_t now) {
    auto found = signer_of(request, clients, now);
    if (auto* failure = std::get_if<AuthFailure>(&found)) return std::move(*failure);
    auto& [claims, signature, client] = std::get<Signer>(found);
    auto raw = common::from_base64(client.public_key);
    auto key = raw ? common::VerifyKey::from_raw(*raw) : common::Result<common::VerifyKey>(raw.error());
    if (!key) return AuthFailure{http::status::internal_server_error, "internal", "stored key unreadable"};
    claims.method = std::string(request.method_string());
    claims.target = std::string(request.target());
    claims.body_sha256 = body_sha256;
    if (!key->verify(common::as_bytes(common::request_signing_message(claims)), signature))
        return unauthorized("the request signature does not verify");
    if (client.banned) return banned();
    auto fresh = clients.claim_nonce(claims.client_id, claims.nonce, now, kRequestWindowS);
    if (!fresh) return AuthFailure{http::status::internal_server_error, "internal", fresh.message()};
    if (!*fresh) return unauthorized("replayed request (nonce already used)");
    return std::move(client);
}

std::variant<TasksInProgress, AuthFailure> check_signing_headers(const http::request_header<>& header,
                                                                 ClientStore& clients, WorkStore& work,
                                                                 std::int64_t now, bool any_client) {
    auto found = signer_of(header, clients, now);
    if (auto* failure = std::get_if<AuthFailure>(&found)) return std::move(*failure);
    const auto& client = std::get<Signer>(found).client;
    if (client.banned) return banned();
    auto tasks = work.tasks_in_progress(client.id);
    if (!tasks) return AuthFailure{http::status::internal_server_error, "internal", tasks.message()};
    if (tasks->empty() && !any_client)
        return AuthFailure{http::status::conflict, "conflict", "this volunteer has no work unit in progress"};
    return std::move(*tasks);
}

bool is_operator(const Request& request, const std::string& token_sha256) {
    auto value = request[http::field::authorization];
    constexpr std::string_view kBearer = "Bearer ";
    if (token_sha256.empty() || !value.starts_with(kBearer)) return false;
    auto digest = common::sha256_hex(common::as_bytes(std::string_view(value.substr(kBearer.size()))));
    return digest.size() == token_sha256.size() &&
           CRYPTO_memcmp(digest.data(), token_sha256.data(), digest.size()) == 0;
}

}  // namespace tessera::server
