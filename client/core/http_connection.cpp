// HttpConnection: resolve, connect, TLS handshake; IdleConnections: the kept ones.
#include "http_connection.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>

#include <openssl/ssl.h>

#include <sys/socket.h>

#include <cerrno>
#include <vector>

namespace tessera::client {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;

}  // namespace

ApiResult<std::unique_ptr<HttpConnection>> HttpConnection::open(const Url& origin, const HttpOptions& options) {
    std::unique_ptr<HttpConnection> connection(new HttpConnection());
    if (origin.tls) {
        auto& context = connection->tls_context_.emplace(ssl::context::tls_client);
        boost::system::error_code error;
        if (options.ca_file.empty())
            context.set_default_verify_paths(error);
        else
            context.load_verify_file(options.ca_file.string(), error);
        if (error)
            return ApiFailure{FailureKind::Local,
                              "cannot load the trusted certificates" +
                                  (options.ca_file.empty() ? std::string() : " from " + options.ca_file.string()) +
                                  ": " + error.message()};
        context.set_verify_mode(ssl::verify_peer);
    }
    tcp::resolver resolver(connection->io_);
    auto endpoints = resolver.resolve(origin.host, std::to_string(origin.port));
    if (!origin.tls) {
        auto& stream = connection->plain_.emplace(connection->io_);
        stream.expires_after(options.timeout);
        stream.connect(endpoints);
        return connection;
    }
    auto& stream = connection->tls_.emplace(connection->io_, *connection->tls_context_);
    if (!SSL_set_tlsext_host_name(stream.native_handle(), origin.host.c_str()))
        return ApiFailure{FailureKind::Local, "TLS: cannot set the server name"};
    stream.set_verify_callback(ssl::host_name_verification(origin.host));
    beast::get_lowest_layer(stream).expires_after(options.timeout);
    beast::get_lowest_layer(stream).connect(endpoints);
    stream.handshake(ssl::stream_base::client);
    return connection;
}

bool HttpConnection::closed_by_server() {
    auto& socket = tls_ ? beast::get_lowest_layer(*tls_).socket() : plain_->socket();
    if (!socket.is_open()) return true;
    char byte = 0;
    auto got = ::recv(socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    // 0: the server's end of stream; -1 with EAGAIN: open and quiet. A byte waiting (a TLS
    // close_notify) is found by the exchange, which then retries on a new connection.
    return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

void HttpConnection::finish() {
    beast::error_code ignored;
    if (tls_) {
        beast::get_lowest_layer(*tls_).expires_after(std::chrono::seconds(5));
        tls_->shutdown(ignored);
    } else {
        plain_->socket().shutdown(tcp::socket::shutdown_both, ignored);
    }
}

std::unique_ptr<HttpConnection> IdleConnections::take(const std::string& origin, std::chrono::seconds keep_alive) {
    std::vector<std::unique_ptr<HttpConnection>> expired;  // closed outside the lock
    std::unique_ptr<HttpConnection> found;
    {
        std::lock_guard lock(mutex_);
        auto now = std::chrono::steady_clock::now();
        auto [first, last] = idle_.equal_range(origin);
        auto newest = idle_.end();  // equal keys keep their insertion order: the last is the newest
        for (auto it = first; it != last;) {
            if (now - it->second->idle_since < keep_alive) {
                newest = it++;
                continue;
            }
            expired.push_back(std::move(it->second));
            it = idle_.erase(it);
        }
        if (newest != idle_.end()) {
            found = std::move(newest->second);
            idle_.erase(newest);
        }
    }
    if (found && found->closed_by_server()) return nullptr;
    return found;
}

void IdleConnections::give_back(const std::string& origin, std::unique_ptr<HttpConnection> connection,
                                std::chrono::seconds keep_alive) {
    if (keep_alive.count() <= 0) return;
    connection->idle_since = std::chrono::steady_clock::now();
    std::unique_ptr<HttpConnection> oldest;  // closed outside the lock
    std::lock_guard lock(mutex_);
    idle_.emplace(origin, std::move(connection));
    if (idle_.size() <= kMaxIdle) return;
    auto victim = idle_.begin();
    for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (it->second->idle_since < victim->second->idle_since) victim = it;
    oldest = std::move(victim->second);
    idle_.erase(victim);
}

}  // namespace tessera::client
