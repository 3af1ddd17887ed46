// The HTTP(S) server: an acceptor and one coroutine per connection (as Beast's
// server-flex-awaitable example). A session reads the header first, asks the API how large a
// body the route may send, then reads the body under a deadline (an upload's into a spool file,
// once its header has passed the cheap checks); it serves requests in order
// (keep-alive, one response in flight). Connections beyond the cap are closed on accept. The
// I/O threads only move bytes: every request is answered by the API on the handler pool
// (database, hashing, fsync, signing), and the session awaits the response.
// Thread-safe to start and stop from any thread; sessions run on the io_context's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/thread_pool.hpp>

#include "api.h"
#include "upload_pace.h"
#include "result.h"
#include "bytes.h"

namespace tessera::server {

struct HttpSettings {
    std::string address = "127.0.0.1";
    std::uint16_t port = 8443;  // 0: any free port
    std::uint32_t header_limit_bytes = 8 << 10;
    std::chrono::seconds header_timeout{30};
    std::chrono::seconds body_timeout{300};  // a request's body (an upload's: upload_pace)
    UploadPace upload_pace;                  // how long an upload's body may take
    std::size_t max_connections = 256;
    // Upload bodies being read at once: their bytes (Content-Length, or the upload cap when
    // chunked) in all, and their count per volunteer (beyond either: 503 with Retry-After).
    // Bodies go to disk as they arrive, so this bounds the spool's disk, not memory.
    std::uint64_t upload_spool_bytes = 2 * common::kGiB;
    std::size_t max_uploads_per_client = 2;
    // Where upload bodies are spooled: the results directory, so that a received delta is moved
    // into place, not copied (ServerApp sets it).
    std::filesystem::path upload_spool_directory = ".";
    FileSystem* upload_spool_files = &posix_file_system();  // the server's (ServerApp sets it)
    // Reverse proxies whose X-Forwarded-For is believed (client_address.h); none: the peer.
    std::vector<boost::asio::ip::address> trusted_proxies;
    std::filesystem::path tls_cert;  // both set: HTTPS
    std::filesystem::path tls_key;
};

struct SessionContext;  // what the sessions share (http_server.cpp)

class HttpServer {
public:
    // `handlers` runs Api::handle; it must outlive the server's sessions.
    HttpServer(boost::asio::io_context& io, boost::asio::thread_pool& handlers, Api& api, HttpSettings settings);
    ~HttpServer();
    // Binds and starts accepting; the port actually bound is port().
    common::Status start();
    // Stops accepting.
    void stop();
    // Stops accepting and lets the open connections end: idle ones are closed at once, event
    // streams end, requests being read or answered finish (their connection closes after the
    // response). Returns when none is left, or after `deadline`.
    void drain(std::chrono::milliseconds deadline);
    std::uint16_t port() const { return port_; }

private:
    boost::asio::io_context& io_;
    HttpSettings settings_;
    std::shared_ptr<SessionContext> context_;  // declared after settings_: built from the same argument
    std::optional<boost::asio::ssl::context> tls_;
    std::shared_ptr<boost::asio::ip::tcp::acceptor> acceptor_;
    std::shared_ptr<std::atomic<std::size_t>> connections_;
    std::uint16_t port_ = 0;
};

}  // namespace tessera::server
