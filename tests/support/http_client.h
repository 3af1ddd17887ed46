// A blocking HTTP/1.1 client for tests (Boost.Beast over a loopback socket), with signed
// volunteer requests. One connection per request.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "ed25519.h"
#include "request_signing.h"

namespace tessera::testing {

struct HttpReply {
    int status = 0;
    std::string body;
    std::map<std::string, std::string> headers;  // lower-case names
};

inline HttpReply http_call(std::uint16_t port, boost::beast::http::verb method, const std::string& target,
                           const std::string& body = "", const std::map<std::string, std::string>& headers = {}) {
    namespace beast = boost::beast;
    namespace http = beast::http;
    boost::asio::io_context io;
    boost::asio::ip::tcp::resolver resolver(io);
    beast::tcp_stream stream(io);
    stream.connect(resolver.resolve("127.0.0.1", std::to_string(port)));
    http::request<http::string_body> request{method, target, 11};
    request.set(http::field::host, "127.0.0.1");
    for (const auto& [name, value] : headers) request.set(name, value);
    request.body() = body;
    if (!body.empty() || method == http::verb::post) request.prepare_payload();
    beast::error_code error;
    http::write(stream, request, error);  // a server that refuses early may close mid-body
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{1} << 31);
    if (method == http::verb::head) parser.skip(true);
    http::read(stream, buffer, parser, error);
    HttpReply reply;
    if (error || !parser.is_header_done()) return reply;  // status 0: no answer
    auto response = parser.release();
    reply.status = static_cast<int>(response.result_int());
    reply.body = response.body();
    for (const auto& field : response) {
        std::string name(field.name_string());
        for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        reply.headers[name] = std::string(field.value());
    }
    stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, error);
    return reply;
}

inline HttpReply http_get(std::uint16_t port, const std::string& target,
                          const std::map<std::string, std::string>& headers = {}) {
    return http_call(port, boost::beast::http::verb::get, target, "", headers);
}

// The four signature headers of a volunteer request at time `now`.
inline std::map<std::string, std::string> signed_headers(const std::string& target, const std::string& body,
                                                         const std::string& client_id, const common::SigningKey& key,
                                                         std::int64_t now) {
    auto signed_request = common::sign_request("POST", target, common::as_bytes(body), client_id, key, now);
    return {{std::string(common::kHeaderClient), signed_request.client_id},
            {std::string(common::kHeaderTimestamp), signed_request.timestamp},
            {std::string(common::kHeaderNonce), signed_request.nonce},
            {std::string(common::kHeaderSignature), signed_request.signature}};
}

inline HttpReply http_post(std::uint16_t port, const std::string& target, const std::string& body,
                           const std::map<std::string, std::string>& headers = {}) {
    return http_call(port, boost::beast::http::verb::post, target, body, headers);
}

}  // namespace tessera::testing
