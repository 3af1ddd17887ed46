// ServerApi: request signing, JSON bodies, and answers parsed or turned into ApiFailures.
#include "server_api.h"

#include <boost/json.hpp>

#include <chrono>

#include "request_signing.h"
#include "result_upload.h"
#include "server_answer.h"
#include "text_encoding.h"

namespace tessera::client {
namespace {

// Parses a 200 answer's body as message type T.
template <class T>
ApiResult<T> parsed(const std::string& route, ApiResult<std::string> body) {
    if (!body) return body.error();
    auto message = common::parse_message<T>(*body);
    if (!message) return ApiFailure{FailureKind::BadAnswer, route + ": malformed answer: " + message.message()};
    return std::move(*message);
}

}  // namespace

std::int64_t unix_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

ApiResult<common::ServerInfo> ServerApi::server_info() const {
    auto reply = http_.request(server_, "GET", server_.path + "/api/v1/server");
    if (!reply) return reply.error();
    if (reply->status != 200) return refusal_of("server", *reply);
    auto info = common::parse_server_info(reply->body);
    if (!info) return ApiFailure{FailureKind::BadAnswer, "server: malformed answer: " + info.message()};
    return std::move(*info);
}

ApiResult<common::RegisterResponse> ServerApi::register_client(const std::string& name, const std::string& version) {
    common::RegisterRequest request{common::to_base64(key_.verify_key().raw()), name, version};
    auto target = server_.path + "/api/v1/register";
    auto reply = http_.request(server_, "POST", target, boost::json::serialize(common::to_json(request)),
                               {{"Content-Type", "application/json"}});
    if (!reply) return reply.error();
    if (reply->status != 200) return refusal_of("register", *reply);
    return parsed<common::RegisterResponse>("register", std::move(reply->body));
}

ApiResult<common::WorkResponse> ServerApi::request_work(const common::WorkRequest& request) {
    return parsed<common::WorkResponse>("work", post_json("work", common::to_json(request)));
}

ApiResult<common::HeartbeatResponse> ServerApi::heartbeat(const std::string& wu_id) {
    return parsed<common::HeartbeatResponse>(
        "heartbeat", post_json("heartbeat", common::to_json(common::WorkUnitRef{client_id_, wu_id})));
}

ApiStatus ServerApi::abandon(const std::string& wu_id) {
    auto reply = post_json("abandon", common::to_json(common::WorkUnitRef{client_id_, wu_id}));
    if (!reply) return reply.error();
    return {};
}

ApiResult<bool> ServerApi::upload_result(const std::string& packed) {
    // The server checks an upload's header before its body (docs/protocol.md): the body waits
    // for its 100 Continue.
    auto reply = post("results", packed, "application/octet-stream", {{"Expect", "100-continue"}});
    if (!reply) return reply.error();
    boost::system::error_code error;
    auto answer = boost::json::parse(*reply, error);
    const auto* wanted = error || !answer.is_object() ? nullptr : answer.as_object().if_contains("moments_wanted");
    return wanted != nullptr && wanted->is_bool() && wanted->as_bool();
}

ApiStatus ServerApi::upload_moments(const std::string& wu_id, const common::Bytes& moments) {
    auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{client_id_, wu_id}));
    auto body = common::pack_result_upload(ref, moments);
    auto reply = post("results/moments", std::string(body.begin(), body.end()), "application/octet-stream",
                      {{"Expect", "100-continue"}});
    if (!reply) return reply.error();
    return {};
}

ApiResult<common::ResultStatus> ServerApi::result_status(const std::string& wu_id) {
    return parsed<common::ResultStatus>("result",
                                        post_json("result", common::to_json(common::WorkUnitRef{client_id_, wu_id})));
}

ApiResult<std::string> ServerApi::post_json(const std::string& route, const boost::json::value& body) {
    return post(route, boost::json::serialize(body), "application/json");
}

ApiResult<std::string> ServerApi::post(const std::string& route, const std::string& body,
                                       const std::string& content_type,
                                       const std::map<std::string, std::string>& extra_headers) {
    auto target = server_.path + "/api/v1/" + route;
    auto signed_headers = common::sign_request("POST", target, common::as_bytes(body), client_id_, key_, unix_now());
    std::map<std::string, std::string> headers{{"Content-Type", content_type},
                                               {std::string(common::kHeaderClient), signed_headers.client_id},
                                               {std::string(common::kHeaderTimestamp), signed_headers.timestamp},
                                               {std::string(common::kHeaderNonce), signed_headers.nonce},
                                               {std::string(common::kHeaderSignature), signed_headers.signature}};
    headers.insert(extra_headers.begin(), extra_headers.end());
    auto reply = http_.request(server_, "POST", target, body, headers);
    if (!reply) return reply.error();
    if (reply->status != 200) return refusal_of(route, *reply);
    return std::move(reply->body);
}

}  // namespace tessera::client
