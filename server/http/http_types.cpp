// Response helpers.
#include "http_types.h"

#include <boost/json.hpp>

namespace tessera::server {

Response text_response(const Request& request, http::status status, std::string body, const std::string& type) {
    http::response<http::string_body> response{status, request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, type);
    response.set(http::field::cache_control, "no-store");
    response.keep_alive(request.keep_alive());
    response.body() = std::move(body);
    response.prepare_payload();
    return response;
}

Response json_response(const Request& request, http::status status, const boost::json::value& body) {
    return text_response(request, status, boost::json::serialize(body) + "\n", "application/json");
}

Response error_response(const Request& request, http::status status, const std::string& code,
                        const std::string& message) {
    return json_response(request, status, {{"error", code}, {"message", message}});
}

boost::json::value number_or_null(const std::optional<double>& value) {
    return value ? boost::json::value(*value) : boost::json::value(nullptr);
}

boost::json::value number_or_null(const std::optional<std::int64_t>& value) {
    return value ? boost::json::value(*value) : boost::json::value(nullptr);
}

Response internal_error(const Request& request, const std::string& message) {
    return error_response(request, http::status::internal_server_error, "internal", message);
}

}  // namespace tessera::server
