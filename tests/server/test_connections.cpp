// The server's connections, in process over loopback: the connection cap, idle timeouts, a
// stop with an upload in flight, the upload pace, and the event stream.
#include <doctest/doctest.h>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <atomic>
#include <functional>
#include <thread>

#include "raw_http.h"
#include "server_fixture.h"
#include "upload_pace.h"

using namespace tessera;
using namespace tessera::testing;
namespace http = boost::beast::http;

namespace {

// Reads until the server closes the connection; what it sent before closing.
std::string read_until_closed(boost::asio::ip::tcp::socket& socket) {
    std::string answer;
    boost::system::error_code error;
    boost::asio::read(socket, boost::asio::dynamic_buffer(answer), error);
    return answer;
}

boost::asio::ip::tcp::socket connect_to(boost::asio::io_context& io, std::uint16_t port) {
    boost::asio::ip::tcp::socket socket(io);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), port});
    return socket;
}

// A connection the server has answered on: certainly accepted and counted. It stays open
// (keep-alive), idle.
boost::asio::ip::tcp::socket answered_connection(boost::asio::io_context& io, std::uint16_t port) {
    auto socket = connect_to(io, port);
    boost::asio::write(socket, boost::asio::buffer(std::string("GET /api/v1/stats HTTP/1.1\r\nHost: x\r\n\r\n")));
    boost::beast::flat_buffer buffer;
    boost::beast::http::response<boost::beast::http::string_body> response;
    boost::beast::http::read(socket, buffer, response);
    REQUIRE(response.result_int() == 200);
    REQUIRE(buffer.size() == 0);
    return socket;
}

// A volunteer's upload of a made-up result for `wu`, as a request's head and body.
std::pair<std::string, std::string> upload_request(TestServer& server, TestVolunteer& volunteer,
                                                   const common::WorkUnit& wu) {
    auto delta = common::encode_delta(volunteer.made_up_delta(wu, 1e-3f), wu.encoding).value().bytes;
    auto packed =
        common::pack_result_upload(boost::json::serialize(common::to_json(volunteer.manifest_for(wu, delta))), delta);
    std::string body(packed.begin(), packed.end());
    std::string head =
        "POST /api/v1/results HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
    for (const auto& [name, value] :
         signed_headers("/api/v1/results", body, volunteer.id(), volunteer.key(), server.now()))
        head += name + ": " + value + "\r\n";
    return {head + "\r\n", body};
}

}  // namespace

TEST_CASE("connections beyond the cap are closed; idle connections time out") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) {
        options.http.max_connections = 2;
        options.http.header_timeout = std::chrono::seconds(1);
    });
    boost::asio::io_context io;
    auto first = answered_connection(io, server.port());
    auto second = answered_connection(io, server.port());
    auto third = connect_to(io, server.port());
    boost::asio::write(third, boost::asio::buffer(std::string("GET /api/v1/stats HTTP/1.1\r\nHost: x\r\n\r\n")));
    CHECK(read_until_closed(third).empty());  // refused: closed without an answer
    // The idle ones are closed by the header timeout, which frees their slots.
    CHECK(read_until_closed(first).empty());
    CHECK(read_until_closed(second).empty());
    CHECK(http_get(server.port(), "/api/v1/stats").status == 200);
}

TEST_CASE("stopping closes idle connections at once and lets an upload in flight finish") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) {
        options.http.header_timeout = std::chrono::seconds(3600);  // only the stop can close the idle one
    });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto [head, body] = upload_request(server, volunteer, wu);

    boost::asio::io_context io;
    auto uploading = connect_to(io, server.port());
    boost::asio::write(uploading, boost::asio::buffer(head + body.substr(0, body.size() / 2)));
    auto idle = answered_connection(io, server.port());
    std::jthread stopper([&] { server.stop(); });  // joined on the way out if a read throws
    CHECK(read_until_closed(idle).empty());        // the stop has begun: the idle connection is gone
    boost::asio::write(uploading, boost::asio::buffer(body.substr(body.size() / 2)));
    boost::beast::flat_buffer buffer;
    boost::beast::http::response<boost::beast::http::string_body> response;
    boost::beast::http::read(uploading, buffer, response);
    CHECK(response.result_int() == 200);          // the upload in flight was answered
    CHECK(read_until_closed(uploading).empty());  // and its connection closed after
    stopper.join();
    server.start();
    CHECK(state_of(server, wu.wu_id) != "in_progress");  // the acknowledged result was kept
}

TEST_CASE("an upload's pace: bytes due within the idle timeout, and at the minimum rate once the grace has passed") {
    server::UploadPace pace{std::chrono::seconds(60), std::chrono::seconds(300), 8 << 10};
    auto start = std::chrono::steady_clock::time_point{};
    using std::chrono::seconds;
    CHECK(server::next_bytes_due(pace, start, start, 0) == start + seconds(60));
    CHECK(server::next_bytes_due(pace, start, start + seconds(280), 0) == start + seconds(300));  // the grace ends
    // 80 MiB in by 10 000 s (8.2 KiB/s) earns 10 240 s beyond the grace: the idle timeout rules.
    CHECK(server::next_bytes_due(pace, start, start + seconds(10000), 80 << 20) == start + seconds(10060));
    // 40 MiB by then (4.1 KiB/s): due at 300 + 5 120 s, long past: the connection closes.
    CHECK(server::next_bytes_due(pace, start, start + seconds(10000), 40 << 20) == start + seconds(5420));
    pace.min_bytes_per_s = 0;  // no minimum: only the idle timeout
    CHECK(server::next_bytes_due(pace, start, start + seconds(10000), 0) == start + seconds(10060));
}

TEST_CASE("an upload's body takes as long as it keeps the pace; one that stalls or trickles is closed") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) {
        options.http.body_timeout = std::chrono::seconds(1);
        options.http.upload_pace = {std::chrono::seconds(1), std::chrono::seconds(1), 4 << 10};
    });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto [head, body] = upload_request(server, volunteer, wu);
    REQUIRE(body.size() > 20'000);  // earns 5 s beyond the grace at 4 KiB/s
    boost::asio::io_context io;

    // Half the body, then nothing: closed after the idle second, unanswered.
    auto stalled = connect_to(io, server.port());
    boost::asio::write(stalled, boost::asio::buffer(head + body.substr(0, body.size() / 2)));
    CHECK(read_until_closed(stalled).empty());

    // A byte every 0.4 s never leaves the connection idle for a second, but earns almost no
    // time past the grace: closed while it trickles.
    auto trickling = connect_to(io, server.port());
    boost::asio::write(trickling, boost::asio::buffer(head));
    constexpr int kBytes = 25;  // 10 s of trickling
    int sent = 0;
    for (boost::system::error_code error; sent < kBytes && !error; ++sent) {
        std::this_thread::sleep_for(std::chrono::milliseconds(400));
        boost::asio::write(trickling, boost::asio::buffer(body.data() + sent, 1), error);
    }
    CHECK(sent < kBytes);
    CHECK(read_until_closed(trickling).empty());

    // The whole body in ten pieces over 2.5 s, past the body timeout and the grace, faster than
    // the minimum rate: received and answered.
    auto slow = connect_to(io, server.port());
    boost::asio::write(slow, boost::asio::buffer(head));
    for (std::size_t piece = 0, size = body.size() / 10 + 1; piece * size < body.size(); ++piece) {
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
        boost::asio::write(slow, boost::asio::buffer(body.substr(piece * size, size)));
    }
    boost::beast::flat_buffer buffer;
    http::response<http::string_body> response;
    http::read(slow, buffer, response);
    CHECK(response.result_int() == 200);
    CHECK(state_of(server, wu.wu_id) != "in_progress");
}

TEST_CASE("events stream as server-sent events, resuming after Last-Event-ID") {
    TestServer server;
    TestVolunteer first(server, "first");
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket socket(io);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
    auto events = boost::json::parse(http_get(server.port(), "/api/v1/events").body).at("events").as_array();
    REQUIRE(!events.empty());
    auto last_id = events.back().at("id").as_int64();
    std::string request =
        "GET /api/v1/events/stream HTTP/1.1\r\nHost: x\r\nLast-Event-ID: " + std::to_string(last_id) + "\r\n\r\n";
    boost::asio::write(socket, boost::asio::buffer(request));
    TestVolunteer second(server, "second");  // a new event after the stream started
    std::string received;
    while (received.find("event: client_registered") == std::string::npos) {
        char buffer[4096];
        boost::system::error_code error;
        auto n = socket.read_some(boost::asio::buffer(buffer), error);
        REQUIRE(!error);
        received.append(buffer, n);
    }
    CHECK(received.starts_with("HTTP/1.1 200 OK"));
    CHECK(received.find("Content-Type: text/event-stream") != std::string::npos);
    CHECK(received.find(second.id()) != std::string::npos);
    CHECK(received.find(first.id()) == std::string::npos);  // before Last-Event-ID: not repeated
    CHECK(received.find("id: " + std::to_string(last_id + 1) + "\n") != std::string::npos);
}

TEST_CASE("a stream from the start gets the events written before the server started, read off the I/O threads") {
    TestServer server;  // the task's creation wrote events before the server and its event hub started
    auto events = boost::json::parse(http_get(server.port(), "/api/v1/events?after=0").body).at("events").as_array();
    REQUIRE(!events.empty());
    auto first_id = events.front().at("id").as_int64();
    auto first_kind = std::string(events.front().at("kind").as_string());
    boost::asio::io_context io;
    boost::asio::ip::tcp::socket socket(io);
    socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
    boost::asio::write(
        socket, boost::asio::buffer(std::string("GET /api/v1/events/stream?after=0 HTTP/1.1\r\nHost: x\r\n\r\n")));
    std::string received;
    auto wanted = "id: " + std::to_string(first_id) + "\nevent: " + first_kind + "\n";
    while (received.find(wanted) == std::string::npos) {
        char buffer[4096];
        boost::system::error_code error;
        auto n = socket.read_some(boost::asio::buffer(buffer), error);
        REQUIRE_MESSAGE(!error, "the stream ended before the first event: " << received);
        received.append(buffer, n);
    }
    CHECK(received.starts_with("HTTP/1.1 200 OK"));
    CHECK(http_get(server.port(), "/api/v1/server").status == 200);  // the I/O threads still answer
}

namespace {

std::uint64_t metric_value(TestServer& server, const std::string& name) {
    auto body = http_get(server.port(), "/metrics").body;
    auto at = body.find("\n" + name + " ");
    REQUIRE(at != std::string::npos);
    return std::stoull(body.substr(at + name.size() + 2));
}

bool waited_for(const std::function<bool()>& condition) {
    for (int i = 0; i < 500; ++i) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE(
    "upload bodies being received are bounded by the upload memory and per volunteer: beyond either, 503 with "
    "Retry-After, and honest uploads go on") {
    constexpr std::size_t kBody = 100 << 10;
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) {
        options.http.upload_spool_bytes = 150 << 10;
        options.http.max_uploads_per_client = 1;
    });
    TestVolunteer a(server, "a"), b(server, "b");
    REQUIRE(a.request_work().has_value());  // only a volunteer with a unit in progress may upload
    REQUIRE(b.request_work().has_value());
    const std::string target = "/api/v1/results";

    // a's upload announces 100 KiB and sends nothing more: it holds its place while it is read.
    boost::asio::io_context io;
    auto held = connect_to(io, server.port());
    std::string header = "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(kBody) + "\r\n";
    for (const auto& [name, value] : signed_headers(target, "", a.id(), a.key(), server.now()))
        header += name + ": " + value + "\r\n";
    boost::asio::write(held, boost::asio::buffer(header + "\r\n"));
    REQUIRE(waited_for([&] { return metric_value(server, "tessera_upload_bytes_in_flight") == kBody; }));

    // Over the memory: b's 100 KiB upload waits its turn. Over a's share: a's second upload.
    auto over_memory =
        answer_to_header(server.port(), target, kBody, signed_headers(target, "", b.id(), b.key(), server.now()));
    CHECK(over_memory.starts_with("HTTP/1.1 503"));
    CHECK(over_memory.find("Retry-After: 10") != std::string::npos);
    CHECK(over_memory.find("\"busy\"") != std::string::npos);
    auto over_share =
        answer_to_header(server.port(), target, 1 << 10, signed_headers(target, "", a.id(), a.key(), server.now()));
    CHECK(over_share.starts_with("HTTP/1.1 503"));
    CHECK(metric_value(server, "tessera_uploads_turned_away_total") == 2);
    // Within both, b's upload is read and judged (a malformed body here).
    CHECK(b.post(target, "xy").status == 400);

    // a's connection closes: its place is free, and b's large upload is read.
    held.close();
    REQUIRE(waited_for([&] { return metric_value(server, "tessera_upload_bytes_in_flight") == 0; }));
    CHECK(b.post(target, std::string(kBody, 'x')).status == 400);
}
