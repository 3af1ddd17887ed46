// Upload bodies go to disk as they arrive: many large uploads at once, signed by registered
// volunteers but with signatures that do not verify, leave the server's memory flat (its peak
// resident size, measured in this process, which runs the server) and honest volunteers served.
#include <boost/asio.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include <doctest/doctest.h>

#include <fstream>
#include <regex>

#include "server_fixture.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Peak resident memory of this process in KiB since the last reset_peak_memory (Linux).
std::uint64_t peak_memory_kib() {
    std::ifstream status("/proc/self/status");
    std::string text((std::istreambuf_iterator<char>(status)), std::istreambuf_iterator<char>());
    std::smatch match;
    REQUIRE(std::regex_search(text, match, std::regex(R"(VmHWM:\s+(\d+) kB)")));
    return std::stoull(match[1].str());
}

void reset_peak_memory() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.close();
    REQUIRE_MESSAGE(clear.good(), "cannot reset the peak resident size (/proc/self/clear_refs)");
}

using Socket = boost::asio::ip::tcp::socket;

// An upload of `body` signed over other bytes: it passes the header's checks, and its signature
// fails only once the body has been read.
std::string forged_upload_header(const TestVolunteer& volunteer, TestServer& server, std::size_t length) {
    const std::string target = "/api/v1/results";
    std::string header =
        "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(length) + "\r\n";
    for (const auto& [name, value] :
         signed_headers(target, "other bytes", volunteer.id(), volunteer.key(), server.now()))
        header += name + ": " + value + "\r\n";
    return header + "\r\n";
}

}  // namespace

TEST_CASE("large uploads whose signatures fail are spooled, not held: the server's memory stays flat") {
    // dit-s: its upload cap (about 265 MB) lets each forged body be large.
    TestServer server([](TaskConfig& config) { config.model = "dit-s"; });
    constexpr int kVolunteers = 4;  // two uploads each at once: the default share
    constexpr std::size_t kBody = 48 << 20;
    std::vector<std::unique_ptr<TestVolunteer>> forgers;
    for (int i = 0; i < kVolunteers; ++i) {
        forgers.push_back(std::make_unique<TestVolunteer>(server, "forger " + std::to_string(i)));
        REQUIRE(forgers.back()->request_work().has_value());
    }
    TestVolunteer honest(server, "honest");
    auto unit = honest.request_work().value();
    auto delta = honest.made_up_delta(unit, 1e-4f);

    // A valid framing (a 2-byte manifest) and zeros: sent from one buffer, so this process's
    // own memory does not grow with the uploads.
    std::string body(kBody, '\0');
    body[0] = 2;
    body[4] = '{';
    body[5] = '}';
    boost::asio::io_context io;
    std::vector<Socket> sockets;
    reset_peak_memory();
    auto before = peak_memory_kib();  // now the resident size
    for (const auto& forger : forgers) {
        for (int upload = 0; upload < 2; ++upload) {
            auto& socket = sockets.emplace_back(io);
            socket.connect({boost::asio::ip::make_address("127.0.0.1"), server.port()});
            boost::asio::write(socket, boost::asio::buffer(forged_upload_header(*forger, server, kBody)));
            // All but the last byte: the server has read nearly all of every body before any is judged.
            boost::asio::write(socket, boost::asio::buffer(body.data(), kBody - 1));
        }
    }
    for (auto& socket : sockets) boost::asio::write(socket, boost::asio::buffer(body.data() + kBody - 1, 1));
    for (auto& socket : sockets) {
        boost::beast::flat_buffer buffer;
        boost::beast::http::response<boost::beast::http::string_body> answer;
        boost::beast::http::read(socket, buffer, answer);
        CHECK(answer.result_int() == 401);
        CHECK(answer.body().find("does not verify") != std::string::npos);
    }
    auto peak = peak_memory_kib();
    MESSAGE("peak resident size " << before / 1024 << " MiB before, " << peak / 1024 << " MiB during " << sockets.size()
                                  << " uploads of " << (kBody >> 20) << " MiB");
    // Held in memory, the bodies would add 8 × 48 MiB; spooled, a few read buffers.
    CHECK(peak < before + (64 << 10));

    // Nothing left in the spool, and an honest upload is taken.
    for (const auto& entry : std::filesystem::directory_iterator(server.state().results()))
        CHECK(entry.path().filename().string().find("upload") == std::string::npos);
    CHECK(honest.upload(unit, delta).status == 200);
    CHECK(state_of(server, unit.wu_id) != "in_progress");
}
