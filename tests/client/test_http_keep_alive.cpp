// The volunteer's HTTP client keeps answered connections: requests to one server share a
// connection (counted by the server's /metrics), `keep_alive = 0` opens one per request, and a
// kept connection the server has closed meanwhile costs a new connection, not a failed request.
#include <doctest/doctest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "http_connection.h"  // and the volunteer's http_client.h (tests/support has one of that name too)
#include "server_fixture.h"
#include "url.h"

using namespace tessera;
using namespace tessera::testing;
using client::HttpClient;

namespace {

// tessera_http_connections_total from the server's /metrics (read on a connection of its own,
// which the figure includes).
std::int64_t connections_accepted(std::uint16_t port) {
    auto body = http_get(port, "/metrics").body;
    const std::string name = "\ntessera_http_connections_total ";
    auto at = body.find(name);
    REQUIRE(at != std::string::npos);
    return std::stoll(body.substr(at + name.size()));
}

client::Url origin_of(std::uint16_t port) {
    return client::parse_url("http://127.0.0.1:" + std::to_string(port)).value();
}

// A loopback server that answers the first request of each connection and then closes it
// without saying so, as a server whose idle limit has passed does; it counts the connections.
class ClosingServer {
public:
    ClosingServer() {
        listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(listener_, 8) == 0);
        socklen_t length = sizeof address;
        REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        port_ = ntohs(address.sin_port);
        thread_ = std::thread([this] { serve(); });
    }
    ~ClosingServer() {
        ::shutdown(listener_, SHUT_RDWR);  // ends the accept
        thread_.join();
        ::close(listener_);
    }
    std::uint16_t port() const { return port_; }
    int accepted() const { return accepted_.load(); }

private:
    void serve() {
        for (;;) {
            int connection = ::accept(listener_, nullptr, nullptr);
            if (connection < 0) return;
            ++accepted_;
            std::string request;
            char chunk[1024];
            while (request.find("\r\n\r\n") == std::string::npos) {
                auto got = ::recv(connection, chunk, sizeof chunk, 0);
                if (got <= 0) break;
                request.append(chunk, static_cast<std::size_t>(got));
            }
            const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
            (void)::send(connection, answer.data(), answer.size(), MSG_NOSIGNAL);
            ::close(connection);
        }
    }

    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::atomic<int> accepted_{0};
    std::thread thread_;
};

}  // namespace

TEST_CASE("requests through one HttpClient share a kept connection; keep_alive 0 opens one per request") {
    TestServer server;
    auto origin = origin_of(server.port());
    constexpr int kRequests = 5;

    HttpClient kept;
    auto before = connections_accepted(server.port());
    for (int i = 0; i < kRequests; ++i) {
        auto answer = kept.request(origin, "GET", "/api/v1/does-not-exist");
        REQUIRE(answer.ok());
        CHECK(answer->status == 404);
    }
    CHECK(connections_accepted(server.port()) - before == 2);  // the client's one and the /metrics read

    client::HttpOptions single;
    single.keep_alive = std::chrono::seconds(0);
    HttpClient one_each(single);
    before = connections_accepted(server.port());
    for (int i = 0; i < kRequests; ++i) REQUIRE(one_each.request(origin, "GET", "/api/v1/does-not-exist").ok());
    CHECK(connections_accepted(server.port()) - before == kRequests + 1);
}

TEST_CASE("a kept connection the server closed is replaced, and the request answered") {
    ClosingServer server;
    HttpClient http;
    auto origin = origin_of(server.port());
    for (int i = 0; i < 3; ++i) {
        auto answer = http.request(origin, "POST", "/api/v1/work", "{}");
        REQUIRE_MESSAGE(answer.ok(), answer.message());
        CHECK(answer->status == 200);
        CHECK(answer->body == "ok");
    }
    CHECK(server.accepted() == 3);
}
