// Receiving a signed upload on a connection: admitted on its header (its checks on the handler
// pool, its task's size limit, a slot among the uploads the server holds) before its body is
// read; the body read at the pace the server asks and spooled to a file on the handler pool
// (hashing and disk writes off the I/O thread) every kSpoolChunkBytes and at its end; the
// answer computed on the handler pool.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <tuple>
#include <variant>

#include "api.h"
#include "response_writer.h"
#include "session_context.h"
#include "upload_pace.h"
#include "spooled_upload_body.h"

namespace tessera::server {
namespace upload_session {

namespace asio = boost::asio;
namespace beast = boost::beast;

// Body bytes an upload's session reads before it hands them to the spool: the memory an
// upload holds beyond its read buffer.
constexpr std::size_t kSpoolChunkBytes = 256 << 10;

// Spools what `upload` has received (and, when `last`, ends the body), on the handler pool.
asio::awaitable<void> spool_on_handler_pool(asio::thread_pool& handlers, SpoolWriter& writer, bool last);

// The API's answer to a spooled upload, computed on the handler pool (it hashes nothing more,
// but fsyncs and queries the store).
asio::awaitable<std::optional<Response>> answer_upload(asio::thread_pool& handlers, Api& api, UploadRequest request);

// 413 for a body over `limit`; the connection closes after it.
Response too_large(const http::request_header<>& header, std::uint64_t limit);

// Whether a signed upload of `length` bytes (if announced) may send its body: its header's
// checks (on the handler pool), its own task's limit, which `limit` becomes, and a slot among
// the uploads the server holds. The slot, held until the upload is answered, or the refusal.
asio::awaitable<std::variant<UploadSlots::Slot, Response>> admit_upload(SessionContext& context,
                                                                        const http::request_header<>& header,
                                                                        std::optional<std::uint64_t> length,
                                                                        std::uint64_t& limit);

// Sends a refusal after which the connection closes; false: the session ends.
template <class Stream, class Record>
asio::awaitable<bool> refuse_and_close(Stream& stream, Response refusal, Record& record) {
    auto [error, written] = co_await beast::async_write(stream, std::move(refusal), kTuple);
    record(written);
    co_return false;
}

// Reads the rest of an upload's body while it keeps the pace (upload_pace.h), handing it to
// `writer` on the handler pool as it goes.
template <class Stream, class Parser>
asio::awaitable<std::tuple<beast::error_code, std::size_t>> read_paced_body(Stream& stream, beast::flat_buffer& buffer,
                                                                            Parser& parser, const UploadPace& pace,
                                                                            asio::thread_pool& handlers,
                                                                            SpoolWriter& writer) {
    auto started = std::chrono::steady_clock::now();
    std::size_t received = 0;
    while (!parser.is_done()) {
        auto now = std::chrono::steady_clock::now();
        beast::get_lowest_layer(stream).expires_at(next_bytes_due(pace, started, now, received));
        auto [error, bytes] = co_await http::async_read_some(stream, buffer, parser, kTuple);
        received += bytes;
        if (error) co_return std::tuple(error, received);
        if (parser.get().body().received.size() >= kSpoolChunkBytes)
            co_await spool_on_handler_pool(handlers, writer, false);
    }
    co_await spool_on_handler_pool(handlers, writer, true);
    co_return std::tuple(beast::error_code(), received);
}

// Reads an upload's body into a spool file (spooled_upload_body.h) and answers it; false when the
// connection is to close.
template <class Stream, class Record>
asio::awaitable<bool> serve_upload(Stream& stream, beast::flat_buffer& buffer,
                                   http::request_parser<http::vector_body<std::uint8_t>>&& header_parser,
                                   std::uint64_t limit, SessionContext& context, Record& record) {
    http::request_parser<SpooledUploadBody> parser(std::move(header_parser));
    parser.body_limit(limit);
    parser.get().body().directory = context.settings.upload_spool_directory;
    parser.get().body().files = context.settings.upload_spool_files;
    beast::get_lowest_layer(stream).expires_after(context.settings.body_timeout);
    if (beast::iequals(parser.get()[http::field::expect], "100-continue")) {
        // The header passed its checks: the client may send the body now.
        http::response<http::empty_body> go_on{http::status::continue_, parser.get().version()};
        auto [error, written] = co_await http::async_write(stream, go_on, kTuple);
        context.api.metrics().add_bytes_out(written);
        if (error) co_return false;
    }
    SpoolWriter writer(parser.get().body());
    auto [read_error, body_bytes] =
        co_await read_paced_body(stream, buffer, parser, context.settings.upload_pace, context.handlers, writer);
    context.api.metrics().add_bytes_in(body_bytes);
    if (read_error == http::error::body_limit) {
        auto refusal = too_large(parser.get(), limit);
        bool more = co_await refuse_and_close(stream, std::move(refusal), record);
        co_return more;
    }
    if (read_error) co_return false;  // closed or timed out mid-body
    auto request = parser.release();
    bool keep_alive = request.keep_alive();
    auto response = co_await answer_upload(context.handlers, context.api, std::move(request));
    beast::get_lowest_layer(stream).expires_after(context.settings.body_timeout);
    auto [write_error, written] = co_await beast::async_write(stream, std::move(*response), kTuple);
    record(written);
    co_return !write_error && keep_alive && !context.drain.draining();
}

}  // namespace upload_session
using upload_session::admit_upload;
using upload_session::refuse_and_close;
using upload_session::serve_upload;
using upload_session::too_large;
}  // namespace tessera::server
