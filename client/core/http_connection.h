// One blocking HTTP(S) connection of the volunteer's client, and the answered connections kept
// for the next request to the same server (HTTP/1.1 keep-alive): a volunteer's work request,
// its downloads and its upload go over one connection, and over TLS one handshake, instead of
// a connection each. A kept connection is reused only while it has been idle for less than
// HttpOptions::keep_alive (under the server's idle limit) and the server has not closed it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "api_result.h"
#include "http_client.h"

namespace tessera::client {

class HttpConnection {
public:
    // Connects to `origin`; over TLS, verified against the options' CA file or the system's
    // store, with the server name sent and checked. A CA file that cannot be loaded is a Local
    // failure; a network or TLS failure is thrown as boost::system::system_error.
    static ApiResult<std::unique_ptr<HttpConnection>> open(const Url& origin, const HttpOptions& options);

    // Calls `use` with the stream: beast::tcp_stream, or an ssl_stream over one.
    template <class Use>
    decltype(auto) use(Use&& use) {
        return tls_ ? use(*tls_) : use(*plain_);
    }
    // True when the server has closed its end (a look at the socket that reads nothing).
    bool closed_by_server();
    // Ends a TLS session with close_notify (best effort); a plain connection just closes.
    void finish();

    std::chrono::steady_clock::time_point idle_since;

private:
    boost::asio::io_context io_;
    std::optional<boost::asio::ssl::context> tls_context_;
    std::optional<boost::beast::tcp_stream> plain_;
    std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> tls_;
};

// Answered connections by origin, at most kMaxIdle in all (the oldest dropped). Thread-safe.
class IdleConnections {
public:
    static constexpr std::size_t kMaxIdle = 16;

    // A kept connection to `origin` idle for less than `keep_alive` and still open, or null.
    std::unique_ptr<HttpConnection> take(const std::string& origin, std::chrono::seconds keep_alive);
    // Keeps `connection` for the next request to `origin` (dropped when keep_alive is 0).
    void give_back(const std::string& origin, std::unique_ptr<HttpConnection> connection,
                   std::chrono::seconds keep_alive);

private:
    std::mutex mutex_;
    std::multimap<std::string, std::unique_ptr<HttpConnection>> idle_;
};

}  // namespace tessera::client
