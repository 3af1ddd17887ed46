// Requests written to a raw socket, for the tests of what the server does with a header alone.
#pragma once

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <cstdint>
#include <map>
#include <string>

namespace tessera::testing {

// Sends only a request header that announces `length` body bytes, and reads the answer.
inline std::string answer_to_header(std::uint16_t port, const std::string& target, std::size_t length,
                                    const std::map<std::string, std::string>& fields = {}) {
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket socket(io);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    std::string header =
        "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n";
    for (const auto& [name, value] : fields) header += name + ": " + value + "\r\n";
    header += "\r\n";
    boost::asio::write(socket, boost::asio::buffer(header));
    std::string answer;
    boost::system::error_code error;
    boost::asio::read(socket, boost::asio::dynamic_buffer(answer), error);  // until the server closes
    return answer;
}

}  // namespace tessera::testing
