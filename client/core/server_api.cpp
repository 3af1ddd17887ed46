// ServerApi: request signing and JSON bodies.
#include "server_api.h"

#include <boost/json.hpp>

#include <chrono>

#include "request_signing.h"
#include "text_encoding.h"

namespace tessera::client {

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string ApiReply::error_message() const {
    boost::system::error_code error;
    auto json = boost::json::parse(body, error);
    if (!error && json.is_object())
        if (const auto* message = json.as_object().if_contains("message"); message && message->is_string())
            return std::string(message->as_string());
    return body.substr(0, 200);
}

common::Result<ApiReply> ServerApi::register_client(const std::string& name, const std::string& version) {
    common::RegisterRequest request{common::to_base64(key_.verify_key().raw()), name, version};
    auto reply = http_.request(server_, "POST", server_.path + "/api/v1/register",
                               boost::json::serialize(common::to_json(request)),
                               {{"Content-Type", "application/json"}});
    if (!reply) return reply.error();
    return ApiReply{reply->status, std::move(reply->body)};
}

common::Result<ApiReply> ServerApi::post(const std::string& route, const std::string& body) {
    auto target = server_.path + "/api/v1/" + route;
    auto signed_headers = common::sign_request("POST", target, common::as_bytes(body), client_id_, key_, unix_now());
    std::map<std::string, std::string> headers{
        {"Content-Type", route == "results" ? "application/octet-stream" : "application/json"},
        {std::string(common::kHeaderClient), signed_headers.client_id},
        {std::string(common::kHeaderTimestamp), signed_headers.timestamp},
        {std::string(common::kHeaderNonce), signed_headers.nonce},
        {std::string(common::kHeaderSignature), signed_headers.signature}};
    auto reply = http_.request(server_, "POST", target, body, headers);
    if (!reply) return reply.error();
    return ApiReply{reply->status, std::move(reply->body)};
}

common::Result<ApiReply> ServerApi::abandon(const std::string& wu_id) {
    return post("abandon", boost::json::serialize(common::to_json(common::WorkUnitRef{client_id_, wu_id})));
}

}  // namespace tessera::client
