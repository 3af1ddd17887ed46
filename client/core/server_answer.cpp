// The HTTP answer as the client keeps it, and a refusal's JSON error read leniently: any body
// is accepted, the first 200 bytes of one that is not a JSON error standing for its message.
#include "server_answer.h"

#include <boost/json.hpp>

#include <cctype>

namespace tessera::client {
namespace {

std::string lower(std::string text) {
    for (auto& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return text;
}

}  // namespace

HttpResponse http_response_of(boost::beast::http::response<boost::beast::http::string_body>&& response) {
    HttpResponse reply;
    reply.status = static_cast<int>(response.result_int());
    reply.body = std::move(response.body());
    for (const auto& field : response) reply.headers[lower(std::string(field.name_string()))] = std::string(field.value());
    return reply;
}

ApiFailure refusal_of(const std::string& route, const HttpResponse& reply) {
    ApiFailure failure{failure_kind_of_status(reply.status), "", reply.status, ""};
    std::string text = reply.body.substr(0, 200);
    boost::system::error_code error;
    auto json = boost::json::parse(reply.body, error);
    if (!error && json.is_object()) {
        const auto& object = json.as_object();
        if (const auto* message = object.if_contains("message"); message && message->is_string())
            text = std::string(message->as_string());
        if (const auto* code = object.if_contains("error"); code && code->is_string())
            failure.code = std::string(code->as_string());
    }
    failure.message = route + ": HTTP " + std::to_string(reply.status) +
                      (failure.code.empty() ? "" : " " + failure.code) + ": " + text;
    return failure;
}

}  // namespace tessera::client
