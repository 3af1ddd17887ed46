// The HTTP types the API is written against, and JSON/error response helpers.
// Handlers build responses as values; sessions own the sockets.
#pragma once

#include <boost/beast/http.hpp>
#include <boost/json/value.hpp>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::server {

namespace http = boost::beast::http;
using Request = http::request<http::vector_body<std::uint8_t>>;
using Response = http::message_generator;

// A JSON body with the request's HTTP version and keep-alive.
Response json_response(const Request& request, http::status status, const boost::json::value& body);
// {"error": code, "message": message} with the given status.
Response error_response(const Request& request, http::status status, const std::string& code,
                        const std::string& message);
// 500 {"error": "internal", …}: a server-side failure (database, disk).
// 503 `busy`: the server cannot take this request now; `Retry-After` says when to try again.
Response busy_response(const Request& request, const std::string& message, int retry_after_s);
// A full disk's Retry-After (seconds).
constexpr int kStorageFullRetryAfterS = 60;
// What never changes under its URL (blobs named by their hash, assets named by theirs).
constexpr const char* kImmutableCacheControl = "public, max-age=31536000, immutable";
// 500 `internal`; but 503 `storage_full` with Retry-After when the message says the disk (or
// the database) is full, since the same request can succeed once space returns.
Response internal_error(const Request& request, const std::string& message);
bool is_out_of_space(std::string_view message);
// What the client is told of an exception a request raised: its text goes to the server's log
// (standard error) with an incident number, the client gets the number ("an internal error,
// incident N: the server's log has its details"); a full disk is still said (internal_error).
std::string logged_exception(const std::exception& error);
Response text_response(const Request& request, http::status status, std::string body, const std::string& type);
// A JSON number, or null when absent (losses not evaluated yet).
boost::json::value number_or_null(const std::optional<double>& value);
boost::json::value number_or_null(const std::optional<std::int64_t>& value);

// A request target without its query.
std::string_view path_of(std::string_view target);
// The most rows (or buckets) one query of the API or the dashboard returns.
constexpr std::int64_t kMaxQueryLimit = 1000;
// Query parameter `name` as an integer in [min, max], or `fallback` when absent or bad.
std::int64_t query_integer(std::string_view target, std::string_view name, std::int64_t fallback, std::int64_t min,
                           std::int64_t max);
// Query parameter `name` as a finite number, or `fallback` when absent or bad.
double query_number(std::string_view target, std::string_view name, double fallback);
// Query parameter `name` percent-decoded ('+' is a space; a malformed escape is kept as it
// is), or nullopt when absent.
std::optional<std::string> query_text(std::string_view target, std::string_view name);

}  // namespace tessera::server
