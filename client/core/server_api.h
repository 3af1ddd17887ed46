// The server's volunteer routes (docs/protocol.md) as calls: registration, signed requests
// for work, heartbeats, abandons and uploads. A network failure is an Error (the caller
// retries with backoff); an HTTP error status comes back in the reply.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "ed25519.h"
#include "http_client.h"
#include "protocol.h"

namespace tessera::client {

struct ApiReply {
    int status = 0;
    std::string body;
    std::string error_message() const;  // the JSON error's message, or the body
};

class ServerApi {
public:
    ServerApi(Url server, HttpClient& http, const common::SigningKey& key)
        : server_(std::move(server)), http_(http), key_(key) {}

    common::Result<ApiReply> register_client(const std::string& name, const std::string& version);
    void set_client_id(std::string id) { client_id_ = std::move(id); }
    const std::string& client_id() const { return client_id_; }
    const Url& server() const { return server_; }

    // POST `route` (under /api/v1/) signed with the volunteer's key.
    common::Result<ApiReply> post(const std::string& route, const std::string& body);
    common::Result<ApiReply> abandon(const std::string& wu_id);

private:
    Url server_;
    HttpClient& http_;
    const common::SigningKey& key_;
    std::string client_id_;
};

std::int64_t unix_now();

}  // namespace tessera::client
