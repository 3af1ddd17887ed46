// HttpServer: acceptor loop and per-connection sessions (plain TCP or TLS) as coroutines.
#include "http_server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include <optional>
#include <thread>
#include <tuple>
#include <variant>

#include "client_address.h"
#include "event_session.h"
#include "logger.h"
#include "response_writer.h"
#include "session_context.h"
#include "upload_session.h"

namespace tessera::server {

namespace asio = boost::asio;

namespace {

using Context = std::shared_ptr<SessionContext>;

namespace beast = boost::beast;
using tcp = asio::ip::tcp;

// A coroutine's escaping exception is a bug: say so instead of losing it silently.
void report_exception(const char* where, std::exception_ptr error) {
    if (!error) return;
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        common::process_log().error("session", std::string(where) + ": " + e.what());
    }
}

// Decrements the open-connection count when a session ends.
class ConnectionSlot {
public:
    explicit ConnectionSlot(std::shared_ptr<std::atomic<std::size_t>> count) : count_(std::move(count)) { ++*count_; }
    ConnectionSlot(const ConnectionSlot&) = delete;
    ConnectionSlot& operator=(const ConnectionSlot&) = delete;
    ~ConnectionSlot() { --*count_; }

private:
    std::shared_ptr<std::atomic<std::size_t>> count_;
};

asio::awaitable<std::optional<Response>> respond(Api& api, Request request, std::string peer) {
    co_return api.handle(std::move(request), std::move(peer));
}

// The API's answer, computed on the handler pool.
asio::awaitable<std::optional<Response>> answer(asio::thread_pool& handlers, Api& api, Request request,
                                                std::string peer) {
    auto work = respond(api, std::move(request), std::move(peer));
    auto response = co_await on_handler_pool(handlers, std::move(work));
    co_return response;
}

// Bytes of a next request already here: in the session's buffer or in the socket.
inline bool request_started(beast::tcp_stream& socket, const beast::flat_buffer& buffer) {
    beast::error_code ignored;
    return buffer.size() > 0 || socket.socket().available(ignored) > 0;
}

// Waits for the next request's header. A stopping server cancels the wait unless a request
// has begun to arrive (that one is read and answered; the header timeout bounds it). The
// strand runs the check and the cancel, so they never touch a session that has moved on.
template <class Stream>
asio::awaitable<std::tuple<beast::error_code, std::size_t>> read_next_header(
    Stream& stream, beast::flat_buffer& buffer, http::request_parser<http::vector_body<std::uint8_t>>& parser,
    ConnectionDrain& drain) {
    auto& socket = beast::get_lowest_layer(stream);
    auto waiting = std::make_shared<beast::tcp_stream*>(&socket);
    auto strand = socket.get_executor();
    std::uint64_t ticket = 0;
    bool idle = drain.enter_idle(ticket, [waiting, strand, &buffer] {
        asio::post(strand, [waiting, &buffer] {
            if (*waiting && !request_started(**waiting, buffer)) (*waiting)->cancel();
        });
    });
    if (!idle && !request_started(socket, buffer))
        co_return std::tuple(beast::error_code(asio::error::operation_aborted), std::size_t{0});
    auto result = co_await http::async_read_header(stream, buffer, parser, kTuple);
    *waiting = nullptr;
    if (idle) drain.leave_idle(ticket);
    co_return result;
}

// Reads a request's body and answers it on the handler pool; false when the connection is to
// close.
template <class Stream, class Record>
asio::awaitable<bool> serve_request(Stream& stream, beast::flat_buffer& buffer,
                                    http::request_parser<http::vector_body<std::uint8_t>>& parser, std::uint64_t limit,
                                    SessionContext& context, const std::string& peer, Record& record) {
    const auto& settings = context.settings;
    beast::get_lowest_layer(stream).expires_after(settings.body_timeout);
    auto [read_error, body_bytes] = co_await http::async_read(stream, buffer, parser, kTuple);
    context.api.metrics().add_bytes_in(body_bytes);
    if (read_error == http::error::body_limit) {  // a chunked body past the limit
        auto refusal = too_large(parser.get(), limit);
        bool more = co_await refuse_and_close(stream, std::move(refusal), record);
        co_return more;
    }
    if (read_error) co_return false;  // closed or timed out mid-body
    auto request = parser.release();
    bool keep_alive = request.keep_alive();
    auto from = client_address(peer, request["X-Forwarded-For"], settings.trusted_proxies);
    auto response = co_await answer(context.handlers, context.api, std::move(request), std::move(from));
    beast::get_lowest_layer(stream).expires_after(settings.body_timeout);
    auto [write_error, written] = co_await write_response(stream, context.handlers, std::move(*response));
    record(written);
    co_return !write_error && keep_alive && !context.drain.draining();
}

template <class Stream>
asio::awaitable<void> serve_requests(Stream& stream, beast::flat_buffer& buffer, Context context) {
    auto& api = context->api;
    const auto& settings = context->settings;
    beast::error_code endpoint_error;
    auto endpoint = beast::get_lowest_layer(stream).socket().remote_endpoint(endpoint_error);
    auto peer = endpoint_error ? std::string() : endpoint.address().to_string();
    for (;;) {
        http::request_parser<http::vector_body<std::uint8_t>> parser;
        parser.header_limit(settings.header_limit_bytes);
        // Beast checks Content-Length against the limit while parsing the header, before the
        // route is known: read the header unlimited and apply the route's limit below.
        parser.body_limit(boost::none);
        beast::get_lowest_layer(stream).expires_after(settings.header_timeout);
        auto [header_error, header_bytes] = co_await read_next_header(stream, buffer, parser, context->drain);
        auto& metrics = api.metrics();
        metrics.add_bytes_in(header_bytes);
        if (header_error) co_return;  // closed, timed out or malformed: nothing useful to answer
        auto started = std::chrono::steady_clock::now();
        const auto& header = parser.get();
        auto target = std::string_view(header.target());
        auto group = api.route_group(target);
        auto record = [&](std::size_t written) {
            metrics.add_bytes_out(written);
            metrics.observe_request(group,
                                    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
        };
        if (api.is_event_stream(header)) {
            co_await stream_events(stream, api, context->handlers, context->drain, Api::event_stream_start(header));
            co_return;
        }
        auto limit = api.body_limit(header.method(), header.target());
        parser.body_limit(limit);  // enforced per chunk for chunked bodies
        std::optional<Response> refusal;
        std::optional<UploadSlots::Slot> upload;  // held until this upload is answered
        std::optional<std::uint64_t> length;
        if (auto announced = parser.content_length()) length = *announced;
        if (length && *length > limit) {
            refusal = too_large(header, limit);
        } else if (api.checks_header_first(header)) {
            auto admitted = co_await admit_upload(*context, header, length, limit);
            if (auto* slot = std::get_if<UploadSlots::Slot>(&admitted))
                upload.emplace(std::move(*slot));
            else
                refusal = std::move(std::get<Response>(admitted));
        }
        if (refusal) {
            co_await refuse_and_close(stream, std::move(*refusal), record);
            co_return;
        }
        if (upload) {
            // `header` belongs to the parser, which the upload takes over.
            bool more = co_await serve_upload(stream, buffer, std::move(parser), limit, *context, record);
            if (!more) co_return;
            continue;  // the upload's slot is given back here
        }
        bool more = co_await serve_request(stream, buffer, parser, limit, *context, peer, record);
        if (!more) co_return;
    }
}

asio::awaitable<void> plain_session(beast::tcp_stream stream, Context context, std::shared_ptr<ConnectionSlot>) {
    beast::flat_buffer buffer;
    co_await serve_requests(stream, buffer, context);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> tls_session(beast::ssl_stream<beast::tcp_stream> stream, Context context,
                                  std::shared_ptr<ConnectionSlot>) {
    beast::flat_buffer buffer;
    beast::get_lowest_layer(stream).expires_after(context->settings.header_timeout);
    auto [handshake_error] = co_await stream.async_handshake(asio::ssl::stream_base::server, kTuple);
    if (handshake_error) co_return;
    co_await serve_requests(stream, buffer, context);
    beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
    co_await stream.async_shutdown(kTuple);
}

asio::awaitable<void> accept_loop(asio::io_context& io, Context context, std::shared_ptr<tcp::acceptor> acceptor,
                                  asio::ssl::context* tls, std::shared_ptr<std::atomic<std::size_t>> connections) {
    const auto& settings = context->settings;
    for (;;) {
        tcp::socket socket(asio::make_strand(io));  // each connection on its own strand
        auto [error] = co_await acceptor->async_accept(socket, kTuple);
        if (error == asio::error::operation_aborted || !acceptor->is_open()) co_return;
        if (error) continue;
        if (connections->load() >= settings.max_connections) {
            beast::error_code ignored;
            socket.close(ignored);  // over the cap: refuse rather than queue
            continue;
        }
        context->api.metrics().count_connection();
        auto slot = std::make_shared<ConnectionSlot>(connections);
        auto strand = socket.get_executor();
        if (tls) {
            asio::co_spawn(strand,
                           tls_session(beast::ssl_stream<beast::tcp_stream>(beast::tcp_stream(std::move(socket)), *tls),
                                       context, slot),
                           [](std::exception_ptr e) { report_exception("session", e); });
        } else {
            asio::co_spawn(strand, plain_session(beast::tcp_stream(std::move(socket)), context, slot),
                           [](std::exception_ptr e) { report_exception("session", e); });
        }
    }
}

}  // namespace

HttpServer::HttpServer(asio::io_context& io, asio::thread_pool& handlers, Api& api, HttpSettings settings)
    : io_(io), settings_(settings), context_(std::make_shared<SessionContext>(handlers, api, std::move(settings))),
      connections_(std::make_shared<std::atomic<std::size_t>>(0)) {}

HttpServer::~HttpServer() { stop(); }

common::Status HttpServer::start() {
    if (!settings_.tls_cert.empty() || !settings_.tls_key.empty()) {
        if (settings_.tls_cert.empty() || settings_.tls_key.empty())
            return common::make_error("TLS needs both --tls-cert and --tls-key");
        tls_.emplace(asio::ssl::context::tls_server);
        beast::error_code error;
        tls_->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                          asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1);
        tls_->use_certificate_chain_file(settings_.tls_cert.string(), error);
        if (error) return common::make_error("TLS certificate " + settings_.tls_cert.string() + ": " + error.message());
        tls_->use_private_key_file(settings_.tls_key.string(), asio::ssl::context::pem, error);
        if (error) return common::make_error("TLS key " + settings_.tls_key.string() + ": " + error.message());
    }
    beast::error_code error;
    auto address = asio::ip::make_address(settings_.address, error);
    if (error) return common::make_error("bad listen address '" + settings_.address + "'");
    tcp::endpoint endpoint(address, settings_.port);
    acceptor_ = std::make_shared<tcp::acceptor>(asio::make_strand(io_));
    acceptor_->open(endpoint.protocol(), error);
    if (!error) acceptor_->set_option(asio::socket_base::reuse_address(true), error);
    if (!error) acceptor_->bind(endpoint, error);
    if (!error) acceptor_->listen(asio::socket_base::max_listen_connections, error);
    if (error)
        return common::make_error("cannot listen on " + settings_.address + ":" + std::to_string(settings_.port) +
                                  ": " + error.message());
    port_ = acceptor_->local_endpoint().port();
    asio::co_spawn(acceptor_->get_executor(),
                   accept_loop(io_, context_, acceptor_, tls_ ? &*tls_ : nullptr, connections_),
                   [](std::exception_ptr e) { report_exception("accept loop", e); });
    return {};
}

void HttpServer::stop() {
    if (!acceptor_) return;
    asio::post(acceptor_->get_executor(), [acceptor = acceptor_] {
        beast::error_code ignored;
        acceptor->close(ignored);
    });
}

void HttpServer::drain(std::chrono::milliseconds deadline) {
    stop();
    context_->drain.start();
    auto until = std::chrono::steady_clock::now() + deadline;
    while (connections_->load() > 0 && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

}  // namespace tessera::server
