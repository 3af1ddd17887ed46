// The whole system over loopback: tessera-data prepares a small Fashion-MNIST dataset, a real
// tessera-server runs a dit-tiny task, and real tessera-client processes train it. One client
// is killed in the middle of a unit (its unit is reissued after the deadline), one has its
// pinned server key tampered with (it refuses to work). At the end the validation loss is
// clearly below version 0's and every issued unit is accounted for. Then sparse low-bit deltas
// (int4, top-k 25 %) on int2 patches against dense int4 deltas, from the same version 0.
#include <doctest/doctest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/json.hpp>

#include <fstream>
#include <thread>

#include "child_process.h"
#include "ed25519.h"
#include "file_io.h"
#include "http_client.h"
#include "polling.h"
#include "store.h"
#include "temp_dir.h"
#include "text_encoding.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

boost::json::object stats_of(std::uint16_t port) {
    auto reply = http_get(port, "/api/v1/stats");
    return reply.status == 200 ? boost::json::parse(reply.body).as_object() : boost::json::object{};
}

// tessera-server on `port` (0: one the kernel picks); the port it listens on.
std::unique_ptr<ChildProcess> start_server(const std::filesystem::path& state, std::uint16_t& port) {
    auto server = std::make_unique<ChildProcess>(
        std::vector<std::string>{required_env("TESSERA_SERVER"), "run", "--state", state.string(), "--listen",
                                 "127.0.0.1:" + std::to_string(port), "--tick", "1"});
    auto line = server->read_line();  // "tessera-server listening on http://127.0.0.1:PORT"
    auto colon = line.rfind(':');
    if (line.find("listening") == std::string::npos || colon == std::string::npos)
        throw std::runtime_error("server did not start: " + line);
    port = static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1)));
    return server;
}

std::vector<std::string> client_command(std::uint16_t port, const std::filesystem::path& state,
                                        const std::string& name) {
    return {required_env("TESSERA_CLIENT"),
            "--server",
            "http://127.0.0.1:" + std::to_string(port),
            "--state",
            state.string(),
            "--device",
            "cpu",
            "--threads",
            "1",
            "--name",
            name,
            "--quiet"};
}

}  // namespace

TEST_CASE("three volunteers train a model over the network") {
    TempDir dir;
    auto data = dir / "data";
    auto state = dir / "server";
    ChildProcess prepare({required_env("TESSERA_DATA"), "prepare", "fashion-mnist", "--out", data.string(), "--limit", "4000",
                          "--shard-size", "1000", "--autoencoder-steps", "150", "--threads", "2"});
    REQUIRE(prepare.wait() == 0);
    ChildProcess init({required_env("TESSERA_SERVER"), "init", "--state", state.string()});
    REQUIRE(init.wait() == 0);
    ChildProcess create({required_env("TESSERA_SERVER"),
                         "task",
                         "create",
                         "--state",
                         state.string(),
                         "--data",
                         data.string(),
                         "--local-steps",
                         "25",
                         "--batch",
                         "32",
                         "--deadline",
                         "20s",
                         "--target-seconds",
                         "0",
                         "--eval-interval",
                         "1",
                         "--eval-samples",
                         "512",
                         "--replication",
                         "0",
                         "--loss-check",
                         "0.5"});
    REQUIRE(create.wait() == 0);

    std::uint16_t port = 0;  // bound by the server, which says which
    auto server = start_server(state, port);
    REQUIRE(wait_for([&] { return stats_of(port).at("validation_loss").is_double(); }, std::chrono::seconds(60)));
    double loss0 = stats_of(port).at("validation_loss").as_double();

    // The volunteer to be killed: wait until it is training, then SIGKILL it.
    auto doomed_state = dir / "doomed";
    std::string doomed_wu;
    {
        ChildProcess doomed(client_command(port, doomed_state, "doomed"));
        REQUIRE(
            wait_for([&] { return std::filesystem::exists(doomed_state / "current.json"); }, std::chrono::seconds(60)));
        doomed.signal(SIGKILL);
        doomed.wait();
        auto current = common::read_file(doomed_state / "current.json", 1 << 20).value();
        doomed_wu = std::string(boost::json::parse(common::as_string_view(current)).at("wu_id").as_string());
    }

    // A volunteer whose pinned server key was replaced refuses to work for this server.
    auto tampered_state = dir / "tampered";
    std::filesystem::create_directories(tampered_state);
    auto impostor = common::SigningKey::generate();
    boost::json::object identity{{"server", "http://127.0.0.1:" + std::to_string(port)},
                                 {"client_id", "c-unknown"},
                                 {"server_public_key", common::to_base64(impostor.verify_key().raw())},
                                 {"server_key_id", impostor.verify_key().key_id()}};
    REQUIRE(common::write_file_atomic(tampered_state / "identity.json",
                                      common::as_bytes(boost::json::serialize(identity))));
    ChildProcess tampered(client_command(port, tampered_state, "tampered"));
    CHECK(tampered.wait() == 3);
    CHECK(!std::filesystem::exists(tampered_state / "current.json"));

    ChildProcess alice(client_command(port, dir / "alice", "alice"));
    ChildProcess bob(client_command(port, dir / "bob", "bob"));
    ChildProcess carol(client_command(port, dir / "carol", "carol"));

    // The server goes away for a while: the volunteers wait with backoff and carry on.
    REQUIRE(wait_for([&] { return stats_of(port).at("version").as_int64() >= 8; }, std::chrono::seconds(120)));
    server->signal(SIGTERM);
    CHECK(server->wait() == 0);
    std::this_thread::sleep_for(std::chrono::seconds(3));
    server = start_server(state, port);
    auto version_after_restart = stats_of(port).at("version").as_int64();

    // Train until the model has moved well on and the doomed unit has been reissued.
    auto store = server::Store::open(state / "server.db", false).value();
    auto reissued = [&] {
        auto a = store->assignment(doomed_wu).value();
        if (!a || a->state != server::AssignmentState::TimedOut) return false;
        return store->assignments_of(a->work_unit_id).value().size() >= 2;
    };
    bool trained = wait_for([&] { return stats_of(port).at("version").as_int64() >= 24 && reissued(); },
                            std::chrono::seconds(240));
    CHECK(trained);
    CHECK(stats_of(port).at("version").as_int64() > version_after_restart);
    for (auto* client : {&alice, &bob, &carol}) client->signal(SIGINT);  // finish the unit, then stop
    for (auto* client : {&alice, &bob, &carol}) CHECK(client->wait() == 0);
    REQUIRE(wait_for(
        [&] {
            auto units = stats_of(port).at("work_units");
            return units.at("returned").as_int64() == 0 && units.at("accepted").as_int64() == 0;
        },
        std::chrono::seconds(60)));
    auto version = stats_of(port).at("version").as_int64();
    REQUIRE(wait_for([&] { return stats_of(port).at("evaluated_version").as_int64() == version; },
                     std::chrono::seconds(60)));
    double loss_end = stats_of(port).at("validation_loss").as_double();
    MESSAGE("validation loss " << loss0 << " at version 0, " << loss_end << " at version " << version);
    CHECK(loss_end < 0.9 * loss0);

    // Every issued unit is merged (or confirms a merged twin), rejected with a stored reason,
    // or ended by a deadline or abandon with its unit sent again or retired.
    auto task = store->current_task().value().value();
    auto rejections = store->rejections(100000).value();
    std::int64_t merged = 0;
    for (auto state_value : server::all_assignment_states())
        for (const auto& a : store->in_state(state_value).value()) {
            using server::AssignmentState;
            if (a.state == AssignmentState::Merged) ++merged;
            if (a.state == AssignmentState::Rejected) {
                bool has_reason = std::any_of(rejections.begin(), rejections.end(), [&](const auto& r) {
                    return r.assignment_id == a.id && !r.reason.empty();
                });
                CHECK_MESSAGE(has_reason, a.id);
            }
            if (a.state == AssignmentState::TimedOut || a.state == AssignmentState::Abandoned) {
                auto unit = store->work_unit(a.work_unit_id).value().value();
                bool resent = store->assignments_of(a.work_unit_id).value().size() >= 2;
                CHECK_MESSAGE((resent || unit.state == server::WorkUnitState::Retired ||
                               unit.state == server::WorkUnitState::Open),
                              a.id);
            }
            CHECK_MESSAGE(a.state != AssignmentState::Returned, a.id);
            CHECK_MESSAGE(a.state != AssignmentState::Accepted, a.id);
        }
    CHECK(merged >= 24);

    // The killed volunteer restarts: it gives back the unit it was training, then works.
    auto restarted_command = client_command(port, doomed_state, "doomed");
    restarted_command.back() = "--json-logs";
    restarted_command.push_back("--once");
    ChildProcess restarted(restarted_command);
    bool gave_back = false;
    for (auto line = restarted.read_line(); !line.empty(); line = restarted.read_line())
        if (line.find("\"event\":\"abandoned\"") != std::string::npos && line.find(doomed_wu) != std::string::npos)
            gave_back = true;
    CHECK(restarted.wait() == 0);
    CHECK(gave_back);
    CHECK(!std::filesystem::exists(doomed_state / "current.json"));

    // A volunteer configured by a file, as the packaged service is, with a short stop grace:
    // one SIGTERM while it holds a unit gives the unit back when the grace runs out; it exits 0.
    // Its download cap keeps it fetching the unit's blobs for seconds, so the signal lands
    // before the unit could finish (a unit already uploading is delivered, not given back).
    auto configured_state = dir / "configured";
    std::ofstream(dir / "client.conf")
        << "# as /etc/tessera/client.conf\nserver = http://127.0.0.1:" << port
        << "\nstate = " << configured_state.string()
        << "\ndevice = cpu\nthreads = 1\njson-logs = true\nstop-grace = 0.01\nmax-download-mbps = 0.05\n";
    ChildProcess configured({required_env("TESSERA_CLIENT"), "--config", (dir / "client.conf").string()});
    REQUIRE(wait_for([&] { return std::filesystem::exists(configured_state / "current.json"); },
                     std::chrono::seconds(60)));
    configured.signal(SIGTERM);
    bool handed_back = false;
    for (auto line = configured.read_line(); !line.empty(); line = configured.read_line())
        if (line.find("\"event\":\"abandoned\"") != std::string::npos) handed_back = true;
    CHECK(configured.wait() == 0);
    CHECK(handed_back);
    CHECK(!std::filesystem::exists(configured_state / "current.json"));

    server->signal(SIGTERM);
    CHECK(server->wait() == 0);
}

namespace {

// Three real clients train a fresh dit-tiny task with the given delta codec flags until
// version `versions`; the validation loss at version 0 and at the end, on the same 512 samples.
std::pair<double, double> train_with(const std::filesystem::path& dir, const std::filesystem::path& data,
                                     const std::vector<std::string>& codec_flags, std::int64_t versions) {
    auto state = dir / "server";
    ChildProcess init({required_env("TESSERA_SERVER"), "init", "--state", state.string()});
    REQUIRE(init.wait() == 0);
    std::vector<std::string> create{required_env("TESSERA_SERVER"), "task", "create", "--state", state.string(), "--data",
                                    data.string(), "--local-steps", "25", "--batch", "32", "--target-seconds", "0",
                                    "--eval-interval", "1", "--eval-samples", "512", "--replication", "0",
                                    "--loss-check", "0.5"};
    create.insert(create.end(), codec_flags.begin(), codec_flags.end());
    REQUIRE(ChildProcess(create).wait() == 0);
    std::uint16_t port = 0;
    auto server = start_server(state, port);
    REQUIRE(wait_for([&] { return stats_of(port).at("validation_loss").is_double(); }, std::chrono::seconds(60)));
    double loss0 = stats_of(port).at("validation_loss").as_double();
    std::vector<std::unique_ptr<ChildProcess>> clients;
    for (const char* name : {"alice", "bob", "carol"})
        clients.push_back(std::make_unique<ChildProcess>(client_command(port, dir / name, name)));
    CHECK(wait_for([&] { return stats_of(port).at("version").as_int64() >= versions; }, std::chrono::seconds(240)));
    for (auto& client : clients) client->signal(SIGINT);
    for (auto& client : clients) CHECK(client->wait() == 0);
    auto version = stats_of(port).at("version").as_int64();
    REQUIRE(wait_for([&] { return stats_of(port).at("evaluated_version").as_int64() == version; },
                     std::chrono::seconds(60)));
    double loss_end = stats_of(port).at("validation_loss").as_double();
    // The volunteers took their models as patches: every version after 0 published one.
    auto store = server::Store::open(state / "server.db", false).value();
    auto task = store->current_task().value().value();
    for (const auto& v : store->versions(task.id).value())
        if (v.version > 0) CHECK_MESSAGE(v.patch_sha256.has_value(), "version " << v.version);
    server->signal(SIGTERM);
    CHECK(server->wait() == 0);
    MESSAGE("codec " << (codec_flags.empty() ? std::string("default") : codec_flags.back()) << ": loss " << loss0
                     << " at version 0, " << loss_end << " at version " << version);
    return {loss0, loss_end};
}

}  // namespace

TEST_CASE("sparse low-bit deltas and int2 patches: real clients lower the loss as dense deltas do") {
    TempDir dir;
    auto data = dir / "data";
    ChildProcess prepare({required_env("TESSERA_DATA"), "prepare", "fashion-mnist", "--out", data.string(), "--limit", "4000",
                          "--shard-size", "1000", "--autoencoder-steps", "150", "--threads", "2"});
    REQUIRE(prepare.wait() == 0);
    auto [dense0, dense] = train_with(dir / "dense", data, {"--codec", "int4"}, 16);
    auto [sparse0, sparse] = train_with(dir / "sparse", data, {"--codec", "int4", "--topk", "0.25"}, 16);
    CHECK(sparse0 == doctest::Approx(dense0));  // the same version 0 and validation samples
    CHECK(dense < 0.9 * dense0);
    CHECK(sparse < 0.9 * sparse0);
    // Sparse deltas move a quarter of the coordinates per result (their error feedback carries
    // the rest into later units): slower at equal versions this early (measured: 74 % of the
    // dense run's drop at versions 17 and 19), not a different outcome.
    CHECK(sparse0 - sparse > 0.6 * (dense0 - dense));
}

TEST_CASE("the client refuses a bad preference with exit 2 before it starts, on the command line and in a file") {
    TempDir dir;
    auto client = [&](std::vector<std::string> args) {
        args.insert(args.begin(), {required_env("TESSERA_CLIENT"), "--server", "http://127.0.0.1:9", "--state",
                                   (dir / "state").string()});
        return ChildProcess(args).wait();
    };
    CHECK(client({"--work-hours", "25:00-07:00"}) == 2);
    CHECK(client({"--work-hours", "22:00"}) == 2);
    CHECK(client({"--exclusive-apps", "/usr/bin/steam"}) == 2);
    CHECK(client({"--idle-minutes", "-1"}) == 2);
    CHECK(client({"--max-upload-mbps", "0.001"}) == 2);
    CHECK(client({"--tasks", "dit tiny"}) == 2);
    CHECK(client({"--exclude-tasks", "a/b"}) == 2);
    std::ofstream(dir / "client.conf") << "work-hours = 25:00-07:00\n";
    CHECK(client({"--config", (dir / "client.conf").string()}) == 2);
    CHECK(!std::filesystem::exists(dir / "state"));  // nothing was started
}
