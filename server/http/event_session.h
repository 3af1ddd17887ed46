// A server-sent event stream (GET /api/v1/events) on a connection: the events held in memory,
// or read from the store on the handler pool for a client resuming from further back.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "api.h"
#include "connection_drain.h"
#include "response_writer.h"

namespace tessera::server {
namespace event_session {

namespace asio = boost::asio;
namespace beast = boost::beast;

inline constexpr auto kEventPoll = std::chrono::milliseconds(500);
inline constexpr auto kEventKeepAlive = std::chrono::seconds(15);

// Events from the store for a stream resuming from before the hub's memory: the new position
// and the text, read on the handler pool.
inline asio::awaitable<std::pair<std::int64_t, std::string>> stored_events(Api& api, std::int64_t after) {
    auto text = api.event_stream_chunk_from_store(after);
    co_return std::pair(after, std::move(text));
}

// Server-sent events until the client goes away or the server stops; the body ends with the
// connection (no length), as SSE allows.
template <class Stream>
asio::awaitable<void> stream_events(Stream& stream, Api& api, asio::thread_pool& handlers, const ConnectionDrain& drain,
                                    std::int64_t after) {
    std::string head =
        "HTTP/1.1 200 OK\r\nServer: tessera-server\r\nContent-Type: text/event-stream\r\n"
        "Cache-Control: no-store\r\nConnection: close\r\n\r\n";
    asio::steady_timer timer(co_await asio::this_coro::executor);
    auto quiet_since = std::chrono::steady_clock::now();
    for (std::string chunk = head;; chunk.clear()) {
        if (auto from_memory = api.event_stream_chunk_from_memory(after)) {
            chunk += *from_memory;
        } else {
            auto work = stored_events(api, after);
            auto stored = co_await on_handler_pool(handlers, std::move(work));
            after = stored.first;
            chunk += stored.second;
        }
        auto now = std::chrono::steady_clock::now();
        if (chunk.empty() && now - quiet_since >= kEventKeepAlive) chunk = ": keep-alive\n\n";
        if (!chunk.empty()) {
            quiet_since = now;
            beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(30));
            auto [error, written] = co_await asio::async_write(stream, asio::buffer(chunk), kTuple);
            api.metrics().add_bytes_out(written);
            if (error) co_return;
        }
        timer.expires_after(kEventPoll);
        auto [wait_error] = co_await timer.async_wait(kTuple);
        if (wait_error || drain.draining()) co_return;
    }
}

}  // namespace event_session
using event_session::stream_events;
}  // namespace tessera::server
