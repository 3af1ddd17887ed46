// A loopback TCP port that was free a moment ago (another process may take it before the
// caller binds it: callers that start servers on it try again).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <cstdint>

namespace tessera::testing {

inline std::uint16_t free_port() {
    boost::asio::io_context io;
    boost::asio::ip::tcp::acceptor acceptor(io, {boost::asio::ip::make_address("127.0.0.1"), 0});
    return acceptor.local_endpoint().port();
}

}  // namespace tessera::testing
