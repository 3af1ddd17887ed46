// The address a request counts against: the peer, or a trusted proxy's X-Forwarded-For read
// from the right, never what a client wrote at its left.
#include <doctest/doctest.h>

#include "client_address.h"

using namespace tessera::server;

TEST_CASE("a trusted proxy's X-Forwarded-For names the client; anyone else's is ignored") {
    auto proxies = parse_trusted_proxies("127.0.0.1, 10.0.0.5").value();
    // Not a proxy: the peer, whatever the header says.
    CHECK(client_address("203.0.113.7", "198.51.100.1", proxies) == "203.0.113.7");
    // From the proxy: the address it appended.
    CHECK(client_address("127.0.0.1", "198.51.100.1", proxies) == "198.51.100.1");
    // A client's own X-Forwarded-For is kept at the left by nginx: never believed.
    CHECK(client_address("127.0.0.1", "6.6.6.6, 198.51.100.1", proxies) == "198.51.100.1");
    // Through two trusted proxies: the first address that is not one.
    CHECK(client_address("127.0.0.1", "198.51.100.1, 10.0.0.5", proxies) == "198.51.100.1");
    CHECK(client_address("127.0.0.1", " 10.0.0.5 ", proxies) == "10.0.0.5");  // proxies all the way
    // No header, a malformed entry, an empty one: the peer.
    CHECK(client_address("127.0.0.1", "", proxies) == "127.0.0.1");
    CHECK(client_address("127.0.0.1", "not-an-address", proxies) == "127.0.0.1");
    CHECK(client_address("127.0.0.1", ",10.0.0.5", proxies) == "127.0.0.1");
    CHECK(client_address("127.0.0.1", "198.51.100.1:4000", proxies) == "127.0.0.1");
    // IPv6, and an IPv4 peer seen through an IPv6 socket.
    CHECK(client_address("::ffff:127.0.0.1", "2001:db8::1", proxies) == "2001:db8::1");
    // No trusted proxy: always the peer.
    CHECK(client_address("127.0.0.1", "198.51.100.1", {}) == "127.0.0.1");
}

TEST_CASE("--trusted-proxy takes addresses only") {
    CHECK(parse_trusted_proxies("").value().empty());
    CHECK(parse_trusted_proxies("::1").value().size() == 1);
    auto name = parse_trusted_proxies("localhost");
    REQUIRE_FALSE(name.ok());
    CHECK(name.message().find("not an IP address") != std::string::npos);
}
