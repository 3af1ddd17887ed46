// Writing an answer from a connection's coroutine without touching the disk on an I/O thread:
// each piece of the response (a blob's 64 KiB read from its file) is prepared on the handler
// pool, and only the socket write runs on the connection's thread.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/error.hpp>

#include <cstddef>
#include <utility>

#include "http_types.h"

namespace tessera::server {

// A coroutine's asynchronous operation answering (error, result…) instead of throwing.
inline constexpr auto kTuple = boost::asio::as_tuple(boost::asio::use_awaitable);

// Runs `work` on the handler pool while this connection's coroutine waits. Named locals, not
// temporaries, in the co_await: GCC 12 can destroy a coroutine's temporaries twice.
template <class T>
boost::asio::awaitable<T> on_handler_pool(boost::asio::thread_pool& handlers, boost::asio::awaitable<T> work) {
    auto on_pool = boost::asio::co_spawn(handlers.get_executor(), std::move(work), boost::asio::use_awaitable);
    auto result = co_await std::move(on_pool);
    co_return result;
}

namespace detail {

using Piece = std::pair<boost::beast::error_code, Response::const_buffers_type>;

inline boost::asio::awaitable<Piece> prepare_piece(Response& response) {
    boost::beast::error_code error;
    auto buffers = response.prepare(error);
    co_return Piece(error, buffers);
}

}  // namespace detail

// Writes the whole response; the error, if any, and the bytes written.
template <class Stream>
boost::asio::awaitable<std::pair<boost::beast::error_code, std::size_t>> write_response(
    Stream& stream, boost::asio::thread_pool& handlers, Response response) {
    std::size_t total = 0;
    while (!response.is_done()) {
        auto preparing = detail::prepare_piece(response);
        auto [error, buffers] = co_await on_handler_pool(handlers, std::move(preparing));
        if (error) co_return std::pair(error, total);
        auto [write_error, written] = co_await boost::asio::async_write(stream, buffers, kTuple);
        total += written;
        if (write_error) co_return std::pair(write_error, total);
        response.consume(written);
    }
    co_return std::pair(boost::beast::error_code(), total);
}

}  // namespace tessera::server
