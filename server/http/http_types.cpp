// Response helpers.
#include "http_types.h"

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <optional>

#include "logger.h"

namespace tessera::server {

namespace {

http::response<http::string_body> string_response(const Request& request, http::status status, std::string body,
                                                  const std::string& type) {
    http::response<http::string_body> response{status, request.version()};
    response.set(http::field::server, "tessera-server");
    response.set(http::field::content_type, type);
    response.set(http::field::cache_control, "no-store");
    response.keep_alive(request.keep_alive());
    response.body() = std::move(body);
    response.prepare_payload();
    return response;
}

std::string error_body(const std::string& code, const std::string& message) {
    return boost::json::serialize(boost::json::object{{"error", code}, {"message", message}}) + "\n";
}

}  // namespace

Response text_response(const Request& request, http::status status, std::string body, const std::string& type) {
    return string_response(request, status, std::move(body), type);
}

Response busy_response(const Request& request, const std::string& message, int retry_after_s) {
    auto response =
        string_response(request, http::status::service_unavailable, error_body("busy", message), "application/json");
    response.set(http::field::retry_after, std::to_string(retry_after_s));
    return response;
}

Response json_response(const Request& request, http::status status, const boost::json::value& body) {
    return text_response(request, status, boost::json::serialize(body) + "\n", "application/json");
}

Response error_response(const Request& request, http::status status, const std::string& code,
                        const std::string& message) {
    return text_response(request, status, error_body(code, message), "application/json");
}

boost::json::value number_or_null(const std::optional<double>& value) {
    return value ? boost::json::value(*value) : boost::json::value(nullptr);
}

boost::json::value number_or_null(const std::optional<std::int64_t>& value) {
    return value ? boost::json::value(*value) : boost::json::value(nullptr);
}

bool is_out_of_space(std::string_view message) {
    // The C library's words for ENOSPC (also in PostgreSQL's "could not extend file" errors) and SQLite's for SQLITE_FULL.
    return message.find("No space left on device") != std::string_view::npos ||
           message.find("database or disk is full") != std::string_view::npos;
}

Response internal_error(const Request& request, const std::string& message) {
    if (is_out_of_space(message)) {
        auto response = string_response(request, http::status::service_unavailable,
                                        error_body("storage_full", "the server is out of disk space: " + message),
                                        "application/json");
        response.set(http::field::retry_after, std::to_string(kStorageFullRetryAfterS));
        return response;
    }
    return error_response(request, http::status::internal_server_error, "internal", message);
}

std::string logged_exception(const std::exception& error) {
    static std::atomic<std::uint64_t> incidents{0};
    std::string what = error.what();
    if (is_out_of_space(what)) return what;
    auto incident = std::to_string(++incidents);
    common::process_log().error("internal_error", "internal error, incident " + incident + ": " + what,
                                {{"incident", incident}});
    return "an internal error, incident " + incident + ": the server's log has its details";
}

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

namespace {

// The text of query parameter `name`, if present.
std::optional<std::string_view> query_value(std::string_view target, std::string_view name) {
    auto query_start = target.find('?');
    if (query_start == std::string_view::npos) return std::nullopt;
    auto query = target.substr(query_start + 1);
    while (!query.empty()) {
        auto amp = query.find('&');
        auto pair = query.substr(0, amp);
        if (pair.starts_with(name) && pair.size() > name.size() && pair[name.size()] == '=')
            return pair.substr(name.size() + 1);
        if (amp == std::string_view::npos) break;
        query.remove_prefix(amp + 1);
    }
    return std::nullopt;
}

}  // namespace

std::int64_t query_integer(std::string_view target, std::string_view name, std::int64_t fallback, std::int64_t min,
                           std::int64_t max) {
    auto text = query_value(target, name);
    if (!text) return fallback;
    std::int64_t value = 0;
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc() || end != text->data() + text->size()) return fallback;
    return std::clamp(value, min, max);
}

double query_number(std::string_view target, std::string_view name, double fallback) {
    auto text = query_value(target, name);
    if (!text) return fallback;
    double value = 0;
    auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc() || end != text->data() + text->size() || !std::isfinite(value)) return fallback;
    return value;
}

std::optional<std::string> query_text(std::string_view target, std::string_view name) {
    auto text = query_value(target, name);
    if (!text) return std::nullopt;
    auto hex = [](char c) -> int {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    };
    std::string decoded;
    for (std::size_t i = 0; i < text->size(); ++i) {
        char c = (*text)[i];
        if (c == '+') {
            decoded += ' ';
        } else if (c == '%' && i + 2 < text->size() && hex((*text)[i + 1]) >= 0 && hex((*text)[i + 2]) >= 0) {
            decoded += static_cast<char>(hex((*text)[i + 1]) * 16 + hex((*text)[i + 2]));
            i += 2;
        } else {
            decoded += c;
        }
    }
    return decoded;
}

}  // namespace tessera::server
