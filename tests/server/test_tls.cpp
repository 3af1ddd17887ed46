// `run --tls-cert --tls-key`: the real server speaks HTTPS with a certificate made by the
// openssl CLI, and a plain-HTTP request to the TLS port gets no answer.
#include <doctest/doctest.h>

#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>

#include "server_process.h"

using namespace tessera;
using namespace tessera::testing;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = boost::asio::ssl;

namespace {

HttpReply https_get(std::uint16_t port, const std::string& target, const std::filesystem::path& trusted_cert) {
    boost::asio::io_context io;
    ssl::context context(ssl::context::tls_client);
    context.load_verify_file(trusted_cert.string());
    context.set_verify_mode(ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> stream(io, context);
    boost::asio::ip::tcp::resolver resolver(io);
    beast::get_lowest_layer(stream).connect(resolver.resolve("127.0.0.1", std::to_string(port)));
    stream.handshake(ssl::stream_base::client);
    http::request<http::string_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "127.0.0.1");
    http::write(stream, request);
    beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(stream, buffer, response);
    return {static_cast<int>(response.result_int()), response.body(), {}};
}

}  // namespace

TEST_CASE("the server serves HTTPS with the operator's certificate") {
    const char* openssl = std::getenv("TESSERA_OPENSSL");
    REQUIRE(openssl != nullptr);
    PreparedState prepared;
    auto cert = prepared.dir() / "cert.pem";
    auto key = prepared.dir() / "key.pem";
    ChildProcess make_cert({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                            "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                            key.string(), "-out", cert.string()});
    REQUIRE(make_cert.wait() == 0);

    ServerProcess server(prepared.state(), {"--tls-cert", cert.string(), "--tls-key", key.string()});
    auto reply = https_get(server.port(), "/api/v1/stats", cert);
    CHECK(reply.status == 200);
    CHECK(boost::json::parse(reply.body).at("version").as_int64() == 0);
    CHECK(http_get(server.port(), "/api/v1/stats").status == 0);  // plain HTTP: no answer

    // A real volunteer over HTTPS, trusting the operator's certificate.
    const char* client = std::getenv("TESSERA_CLIENT");
    REQUIRE(client != nullptr);
    auto url = "https://127.0.0.1:" + std::to_string(server.port());
    ChildProcess volunteer({client, "--server", url, "--state", (prepared.dir() / "volunteer").string(), "--device",
                            "cpu", "--threads", "1", "--once", "--quiet", "--ca-cert", cert.string()});
    CHECK(volunteer.wait() == 0);
    auto store = Store::open(prepared.state().database(), false).value();
    CHECK(store->counts(0).value().assignments.at("merged") == 1);
    // Without the certificate the volunteer does not trust the server: it stops at once with
    // exit code 3 (retrying cannot fix a certificate) and never registers.
    ChildProcess untrusting({client, "--server", url, "--state", (prepared.dir() / "untrusting").string(), "--device",
                             "cpu", "--once", "--quiet"});
    CHECK(untrusting.wait() == 3);
    CHECK(store->clients().value().size() == 1);

    CHECK_THROWS(ServerProcess(prepared.state(), {"--tls-cert", cert.string()}));  // key missing
}
