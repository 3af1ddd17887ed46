// The server's volunteer routes (docs/protocol.md) as typed calls: each signs its request,
// sends it and parses the answer into its message type. An HTTP error status comes back as
// an ApiFailure with the status and the JSON error's code and message; a malformed answer as
// a BadAnswer. Safe to call from several threads once the client id is set.
#pragma once

#include <cstdint>
#include <string>

#include "api_result.h"
#include "bytes.h"
#include "ed25519.h"
#include "http_client.h"
#include "protocol.h"
#include "server_info.h"

namespace tessera::client {

class ServerApi {
public:
    ServerApi(Url server, const HttpClient& http, const common::SigningKey& key)
        : server_(std::move(server)), http_(http), key_(key) {}

    // GET /api/v1/server: the server's key, clock, release and the client releases it asks for.
    ApiResult<common::ServerInfo> server_info() const;
    // Unsigned: the request carries the key being registered.
    ApiResult<common::RegisterResponse> register_client(const std::string& name, const std::string& version);
    void set_client_id(std::string id) { client_id_ = std::move(id); }
    const std::string& client_id() const { return client_id_; }
    const Url& server() const { return server_; }
    // The same volunteer (server, key, id) speaking through another HTTP client.
    ServerApi through(const HttpClient& http) const {
        ServerApi api(server_, http, key_);
        api.client_id_ = client_id_;
        return api;
    }

    ApiResult<common::WorkResponse> request_work(const common::WorkRequest& request);
    ApiResult<common::HeartbeatResponse> heartbeat(const std::string& wu_id);
    ApiStatus abandon(const std::string& wu_id);
    // The packed upload (common/result_upload.h); once the server has stored it, whether its
    // answer asks for the moments the unit started from (docs/protocol.md, "Moments for an audit").
    ApiResult<bool> upload_result(const std::string& packed);
    // Those moments: the optimizer-state file's bytes, framed as an upload.
    ApiStatus upload_moments(const std::string& wu_id, const common::Bytes& moments);
    ApiResult<common::ResultStatus> result_status(const std::string& wu_id);

private:
    // POST `route` (under /api/v1/) signed with the volunteer's key; the body of a 200 answer.
    ApiResult<std::string> post(const std::string& route, const std::string& body, const std::string& content_type,
                                const std::map<std::string, std::string>& extra_headers = {});
    ApiResult<std::string> post_json(const std::string& route, const boost::json::value& body);

    Url server_;
    const HttpClient& http_;
    const common::SigningKey& key_;
    std::string client_id_;
};

std::int64_t unix_now();

}  // namespace tessera::client
