// `tessera-client doctor` against a real in-process server: a machine that can work passes;
// a wrong clock, a key that is not the pinned one, an unreachable server, a state directory
// that is a file, a release older than the server needs and a GPU a CPU build cannot use each
// fail with what to do.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

#include "doctor.h"
#include "ed25519.h"
#include "file_io.h"
#include "free_port.h"
#include "server_fixture.h"
#include "text_encoding.h"
#include "training/device_report.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

struct Diagnosis {
    int exit_code = 0;
    std::string text;
    bool says(const std::string& part) const { return text.find(part) != std::string::npos; }
};

Diagnosis diagnose(const client::VolunteerOptions& options, const std::vector<client::ServerShare>& servers = {}) {
    std::ostringstream out;
    int code = client::run_doctor(options, out, servers);
    MESSAGE(out.str());
    return {code, out.str()};
}

client::VolunteerOptions options_for(std::uint16_t port, const std::filesystem::path& state) {
    client::VolunteerOptions options;
    options.server = "http://127.0.0.1:" + std::to_string(port);
    options.state_dir = state;
    options.device = "cpu";
    options.cache_quota_bytes = 1 << 20;
    return options;
}

// The test server's clock set to this machine's.
void set_clock_to_now(TestServer& server) {
    auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch());
    server.advance(now.count() - server.now());
}

}  // namespace

TEST_CASE("a machine that can work passes, and each check's failure names what to do") {
    TestServer server;
    TempDir dir;
    auto options = options_for(server.port(), dir / "state");

    set_clock_to_now(server);
    auto fine = diagnose(options);
    CHECK(fine.exit_code == 0);
    CHECK(fine.says("the client can work"));
    CHECK(fine.says("not registered yet"));
    CHECK(fine.says("LibTorch "));
    CHECK(fine.says("clock: "));

    // The fixture's clock (a fixed day in 2027): far beyond the signing window.
    server.advance(1'000'000);
    auto skewed = diagnose(options);
    CHECK(skewed.exit_code == 1);
    CHECK(skewed.says("from the server's; signed requests beyond 300 s are refused"));
    CHECK(skewed.says("timedatectl"));
    set_clock_to_now(server);

    // A pinned key that is not the server's.
    std::filesystem::create_directories(dir / "state");
    std::filesystem::permissions(dir / "state", std::filesystem::perms::owner_all);
    auto impostor = common::SigningKey::generate();
    boost::json::object identity{{"server", options.server},
                                 {"client_id", "c-someone"},
                                 {"server_public_key", common::to_base64(impostor.verify_key().raw())},
                                 {"server_key_id", impostor.verify_key().key_id()}};
    REQUIRE(common::write_file_atomic(dir / "state" / "identity.json", common::as_bytes(boost::json::serialize(identity))));
    auto wrong_key = diagnose(options);
    CHECK(wrong_key.exit_code == 1);
    CHECK(wrong_key.says("is not the one pinned at first registration"));
    CHECK(wrong_key.says("identity.json"));
    std::filesystem::remove(dir / "state" / "identity.json");
    CHECK(diagnose(options).exit_code == 0);

    // A GPU asked of a CPU build.
    if (!client::torch_report().cuda_build) {
        auto gpu = options;
        gpu.device = "cuda:0";
        auto no_cuda = diagnose(gpu);
        CHECK(no_cuda.exit_code == 1);
        CHECK(no_cuda.says("this build has no CUDA"));
    }
}

TEST_CASE("the doctor fails an unreachable server, a state path that is a file and a release too old") {
    TempDir dir;
    auto unreachable = diagnose(options_for(free_port(), dir / "state"));
    CHECK(unreachable.exit_code == 1);
    CHECK(unreachable.says("check the URL"));

    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) { options.min_client_version = "99.0.0"; });
    set_clock_to_now(server);
    std::ofstream(dir / "a-file") << "not a directory";
    auto file_state = diagnose(options_for(server.port(), dir / "a-file"));
    CHECK(file_state.exit_code == 1);
    CHECK(file_state.says("is not a directory"));
    CHECK(file_state.says("older than the 99.0.0 this server needs"));

    auto no_server = options_for(server.port(), dir / "state");
    no_server.server.clear();
    auto unnamed = diagnose(no_server);
    CHECK(unnamed.exit_code == 1);
    CHECK(unnamed.says("no server named"));

    // Several servers: each checked, the one out of reach named.
    auto nowhere = "http://127.0.0.1:" + std::to_string(free_port());
    auto servers = client::servers_with_shares("http://127.0.0.1:" + std::to_string(server.port()) + "," + nowhere, "")
                       .value();
    auto both = diagnose(options_for(server.port(), dir / "state"), servers);
    CHECK(both.exit_code == 1);
    CHECK(both.says("server http://127.0.0.1:" + std::to_string(server.port()) + ": tessera-server"));
    CHECK(both.says(nowhere));
    CHECK(both.says("check the URL"));
}
