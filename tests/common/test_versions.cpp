// Release versions (MAJOR.MINOR.PATCH) and the server's statement of them (GET /api/v1/server):
// what parses, what is older, and the named errors of a malformed statement.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <string>

#include "server_info.h"
#include "version_number.h"

using namespace tessera::common;

TEST_CASE("versions parse as three decimal numbers and compare number by number") {
    CHECK(parse_version("0.1.0") == VersionNumber{0, 1, 0});
    CHECK(parse_version("12.0.345") == VersionNumber{12, 0, 345});
    for (const char* bad : {"", "1", "1.2", "1.2.3.4", "1..3", "a.b.c", "1.2.x", "-1.2.3", "1.2.3 ", "1234567.0.0", "1.2."})
        CHECK_MESSAGE(!parse_version(bad), bad);
    CHECK(version_older("0.1.0", "0.2.0"));
    CHECK(version_older("0.9.9", "0.10.0"));  // numbers, not text
    CHECK(version_older("1.2.3", "1.2.4"));
    CHECK_FALSE(version_older("0.2.0", "0.2.0"));
    CHECK_FALSE(version_older("1.0.0", "0.99.99"));
    CHECK(version_older("unknown", "0.1.0"));   // a client that cannot say counts as older
    CHECK_FALSE(version_older("0.1.0", ""));    // no statement: nothing is older
}

TEST_CASE("the server's statement round-trips and refuses what it cannot be") {
    ServerInfo info{"0.1.0", std::string(43, 'A') + "=", "0123456789abcdef", 1'800'000'000, 300, "", "0.1.0"};
    auto text = boost::json::serialize(to_json(info));
    auto back = parse_server_info(text);
    REQUIRE_MESSAGE(back.ok(), (back.ok() ? "" : back.message()));
    CHECK(back->server_key_id == info.server_key_id);
    CHECK(back->time == info.time);
    CHECK(back->min_client_version.empty());
    CHECK(back->recommended_client_version == "0.1.0");

    auto refused = [&](const std::string& field, const boost::json::value& value, const std::string& part) {
        auto json = to_json(info).as_object();
        json[field] = value;
        auto parsed = parse_server_info(boost::json::serialize(json));
        REQUIRE_FALSE(parsed.ok());
        CHECK_MESSAGE(parsed.message().find(part) != std::string::npos, parsed.message());
    };
    refused("version", "1.0", "expected a version");
    refused("min_client_version", "soon", "expected a version");
    refused("server_public_key", boost::json::string(std::string(44, '!')), "32-byte key");
    refused("server_key_id", "XYZ", "server_key_id");
    refused("request_window_s", 0, "request_window_s");
    refused("time", -5, "time");
    auto extra = to_json(info).as_object();
    extra["surprise"] = 1;
    CHECK_FALSE(parse_server_info(boost::json::serialize(extra)).ok());
    CHECK_FALSE(parse_server_info("{").ok());
}
