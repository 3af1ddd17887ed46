// --blob-url-base with a real nginx serving the server's blob directory: work units point
// volunteers at the cache, and the cache serves the same bytes, ranges and ETag semantics.
#include <doctest/doctest.h>

#include <boost/asio/ip/tcp.hpp>

#include <thread>

#include "file_io.h"
#include "nginx_process.h"
#include "server_process.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

HttpReply get_when_up(std::uint16_t port, const std::string& target,
                      const std::map<std::string, std::string>& headers = {}) {
    for (int i = 0; i < 100; ++i) {
        try {
            auto reply = http_get(port, target, headers);
            if (reply.status != 0) return reply;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return {};
}

}  // namespace

TEST_CASE("work units send volunteers to the blob cache, and nginx serves the server's blobs") {
    const char* nginx = std::getenv("TESSERA_NGINX");
    REQUIRE_MESSAGE(nginx != nullptr, "TESSERA_NGINX is not set (scripts/install-deps installs nginx-light)");
    PreparedState prepared;
    auto cache_dir = prepared.dir() / "nginx";
    NginxProcess cache(nginx, cache_dir, "    location /blobs/ { alias " + prepared.state().blobs().string() + "/; }");
    auto cache_port = cache.port();

    auto base = "http://127.0.0.1:" + std::to_string(cache_port) + "/blobs";
    ServerProcess server(prepared.state(), {"--blob-url-base", base + "/"});
    auto port = server.port();
    TestVolunteer volunteer([port] { return port; }, wall_clock, "cached");
    auto wu = volunteer.request_work().value();
    CHECK(wu.blob_base_url == base);  // the trailing slash is dropped

    auto model = get_when_up(cache_port, "/blobs/" + wu.model_blob.sha256);
    REQUIRE(model.status == 200);
    CHECK(common::sha256_hex(common::as_bytes(model.body)) == wu.model_blob.sha256);
    CHECK(static_cast<std::int64_t>(model.body.size()) == wu.model_blob.bytes);
    auto shard = http_get(cache_port, "/blobs/" + wu.shards[0].sha256);
    CHECK(common::sha256_hex(common::as_bytes(shard.body)) == wu.shards[0].sha256);
    // A resumed download: the cache honours Range like the server does.
    auto rest = http_get(cache_port, "/blobs/" + wu.shards[0].sha256, {{"Range", "bytes=100-"}});
    CHECK(rest.status == 206);
    CHECK(rest.body == shard.body.substr(100));
    auto from_server = http_get(port, "/blobs/" + wu.shards[0].sha256, {{"Range", "bytes=100-"}});
    CHECK(from_server.body == rest.body);
    // Blobs the server writes later (new versions) appear in the cache too.
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 200);
    std::optional<common::WorkUnit> next;
    for (int i = 0; i < 100 && (!next || next->base_version == 0); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        next = volunteer.request_work();
    }
    REQUIRE(next.has_value());
    CHECK(next->base_version == 1);
    auto v1 = http_get(cache_port, "/blobs/" + next->model_blob.sha256);
    CHECK(common::sha256_hex(common::as_bytes(v1.body)) == next->model_blob.sha256);
    // nginx, not the server, answered those requests (it logs just after answering).
    bool logged = false;
    for (int i = 0; i < 100 && !logged; ++i) {
        auto log = common::read_file(cache.access_log(), 1 << 20).value();
        logged = common::as_string_view(log).find("/blobs/" + next->model_blob.sha256) != std::string_view::npos;
        if (!logged) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(logged);
}
