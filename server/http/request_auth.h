// Checks a volunteer's signed request (docs/protocol.md, "Request signing"): headers present
// and well-formed, a known and unbanned client, a timestamp within the window, a valid
// signature over method, target, client, timestamp, nonce and body hash, and a nonce not seen
// before. Thread-safe.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "http_types.h"
#include "state_dir.h"
#include "store_clients.h"
#include "store_work.h"

namespace tessera::server {

constexpr std::int64_t kRequestWindowS = 300;

struct AuthFailure {
    http::status status;
    std::string code;
    std::string message;
};

// The answer to a refusal; a failure of the server's own (500) goes through internal_error,
// so a full disk is a 503 `storage_full` there too.
Response refusal_response(const Request& reply_to, const AuthFailure& failure);

// The client, or why the request is refused (401 unauthenticated, 403 banned).
std::variant<ClientRecord, AuthFailure> authenticate(const Request& request, ClientStore& clients, std::int64_t now);
// The same for a request whose body was hashed as it arrived (an upload spooled to disk).
std::variant<ClientRecord, AuthFailure> authenticate(const http::request_header<>& header,
                                                     const std::string& body_sha256, ClientStore& clients,
                                                     std::int64_t now);

// What a signed request's header alone can show, checked before its body is read (an upload's
// body is large): well-formed signing headers, a timestamp within the window, a known, unbanned
// client with a work unit in progress (nothing else may be uploaded; unless `any_client`, for
// moments sent after their unit's upload). Gives the tasks of its units in progress, whose caps
// bound the body. The signature and the nonce cover the body: `authenticate` checks them after it.
using TasksInProgress = std::vector<std::string>;
std::variant<TasksInProgress, AuthFailure> check_signing_headers(const http::request_header<>& header,
                                                                 ClientStore& clients, WorkStore& work,
                                                                 std::int64_t now, bool any_client = false);

// Operator routes: `Authorization: Bearer <token>` whose SHA-256 matches the stored hash.
bool is_operator(const Request& request, const std::string& token_sha256);

}  // namespace tessera::server
