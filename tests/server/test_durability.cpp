// The real tessera-server process: kill -9 while results stream in and merges run, then a
// restart that loses no acknowledged result and resumes at the last committed version (from
// the last checkpoint, merging the results logged since again), on SQLite and on PostgreSQL;
// SIGTERM shuts down cleanly; export writes a committed version, with its EMA.
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <thread>

#include "file_io.h"
#include "postgres_cluster.h"
#include "server_process.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

boost::json::object stats_of(std::uint16_t port) {
    auto reply = http_get(port, "/api/v1/stats");
    if (reply.status != 200) return {};
    return boost::json::parse(reply.body).as_object();
}

// Polls until nothing waits for validation or merging.
boost::json::object wait_settled(std::uint16_t port) {
    for (int i = 0; i < 600; ++i) {
        auto stats = stats_of(port);
        const auto& units = stats.at("work_units");
        if (units.at("returned").as_int64() == 0 && units.at("accepted").as_int64() == 0) return stats;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    FAIL("the server did not settle");
    return {};
}

// The kill -9 test on one back end: `database_url` empty for the state directory's SQLite file.
void kill_during_merging(const std::string& database_url);

}  // namespace

TEST_CASE("kill -9 during merging loses no acknowledged result") {
    SUBCASE("sqlite") { kill_during_merging(""); }
    SUBCASE("postgresql") {
        PostgresCluster cluster;
        kill_during_merging(cluster.create_database("durability"));
    }
}

TEST_CASE("init --db refuses a shared database another server owns, and keeps its settings") {
    PostgresCluster cluster;
    auto url = cluster.create_database("owned");
    TempDir dir;
    StateDir first(dir.path() / "first", url), second(dir.path() / "second", url);
    REQUIRE(initialize_state(first).ok());
    auto store = Store::connect(url, false).value();
    auto owner = store->setting("server_key_id").value().value();
    auto refused = initialize_state(second);
    REQUIRE(!refused.ok());
    CHECK(refused.message().find("belongs to the server with key id " + owner) != std::string::npos);
    CHECK(store->setting("server_key_id").value().value() == owner);
}

namespace {

void kill_during_merging(const std::string& database_url) {
    PreparedState prepared({}, database_url);
    std::set<std::string> acknowledged;
    std::mutex mutex;
    std::int64_t version_before_kill = 0;
    {
        ServerProcess server(prepared.state());
        auto port = server.port();
        std::atomic<bool> stop{false};
        std::vector<std::thread> volunteers;
        for (int v = 0; v < 3; ++v)
            volunteers.emplace_back([&, v] {
                try {
                    TestVolunteer volunteer([port] { return port; }, wall_clock, "v" + std::to_string(v));
                    for (std::uint32_t i = 0; !stop; ++i) {
                        auto wu = volunteer.request_work();
                        if (!wu) return;
                        auto delta = volunteer.made_up_delta(*wu, 1e-3f, i * 7 + static_cast<std::uint32_t>(v));
                        auto reply = volunteer.upload(*wu, delta);
                        if (reply.status == 200) {
                            std::lock_guard lock(mutex);
                            acknowledged.insert(wu->wu_id);
                        }
                    }
                } catch (const std::exception&) {
                    // The server was killed under this volunteer.
                }
            });
        // Let results flow and merges happen, then kill the server in the middle of it. Merging
        // follows acknowledgement asynchronously: on a loaded machine twelve results can be
        // acknowledged before the first merge, so wait for both.
        for (int i = 0; i < 600; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            std::size_t acknowledged_now;
            {
                std::lock_guard lock(mutex);
                acknowledged_now = acknowledged.size();
            }
            if (acknowledged_now < 12) continue;
            auto stats = stats_of(port);
            version_before_kill = stats.empty() ? 0 : stats.at("version").as_int64();
            if (version_before_kill > 0) break;
        }
        server.process().signal(SIGKILL);
        CHECK(server.process().wait() == 128 + SIGKILL);
        stop = true;
        for (auto& t : volunteers) t.join();
    }
    REQUIRE(acknowledged.size() >= 12);
    CHECK(version_before_kill > 0);

    ServerProcess restarted(prepared.state());
    auto stats = wait_settled(restarted.port());
    auto store = Store::connect(prepared.state().database_url(), false).value();
    std::int64_t merged = 0;
    for (const auto& id : acknowledged) {
        auto a = store->assignment(id).value();
        REQUIRE_MESSAGE(a.has_value(), id);
        CHECK_MESSAGE(a->state == AssignmentState::Merged, id << " is " << assignment_state_name(a->state));
    }
    auto task = store->current_task().value().value();
    auto versions = store->versions(task.id).value();
    for (const auto& v : versions) {
        merged += v.merged_results;
        // Every committed version's published model is served and matches its hash: between
        // checkpoints, rebuilt from the patches.
        auto reply = http_get(restarted.port(), "/blobs/" + v.blob_sha256);
        CHECK(reply.status == 200);
        CHECK(common::sha256_hex(common::as_bytes(reply.body)) == v.blob_sha256);
        if (v.checkpoint && v.state_sha256) {
            auto bytes = common::read_file(prepared.state().blobs() / *v.state_sha256, 1 << 30).value();
            CHECK(common::sha256_hex(bytes) == *v.state_sha256);
        }
    }
    // Versions between checkpoints (every 20 by default) were among them: the restart merged
    // the results logged since the last checkpoint again.
    CHECK(std::any_of(versions.begin(), versions.end(), [](const auto& v) { return !v.checkpoint; }));
    CHECK(stats.at("version").as_int64() == task.version);
    CHECK(task.version == static_cast<std::int64_t>(versions.size()) - 1);
    CHECK(merged >= static_cast<std::int64_t>(acknowledged.size()));
    // No temp files survive the restart.
    for (const auto& entry : std::filesystem::directory_iterator(prepared.state().blobs()))
        CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);
}

}  // namespace

TEST_CASE("SIGTERM shuts down gracefully and export writes a committed version") {
    PreparedState prepared;
    ServerProcess server(prepared.state());
    auto port = server.port();
    TestVolunteer volunteer([port] { return port; }, wall_clock, "solo");
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 200);
    wait_settled(port);
    server.process().signal(SIGTERM);
    CHECK(server.process().read_line().find("shutting down") != std::string::npos);
    CHECK(server.process().wait() == 0);

    auto out = prepared.dir() / "model.safetensors";
    ChildProcess exporter({std::getenv("TESSERA_SERVER"), "export", "--state", prepared.state().root().string(),
                           "--version", "1", "--out", out.string()});
    CHECK(exporter.wait() == 0);
    auto bytes = common::read_file(out, 1 << 30).value();
    auto model = common::read_checkpoint(bytes).value();
    auto file = common::parse_safetensors(bytes).value();
    CHECK(file.metadata().at("version") == "1");
    CHECK(file.metadata().at("format") == "tessera.checkpoint");
    auto store = Store::open(prepared.state().database(), false).value();
    auto task = store->current_task().value().value();
    CHECK(store->version(task.id, 1).value()->pinned);  // an exported version is kept by retention
    CHECK(!model.empty());
    // The model and, new tasks keeping one, the EMA of the versions beside it under "ema/".
    auto ema_tensors = std::count_if(model.begin(), model.end(), [](const auto& t) { return t.name.starts_with("ema/"); });
    CHECK(ema_tensors > 0);
    CHECK(static_cast<std::size_t>(ema_tensors) * 2 == model.size());
    auto ema_out = prepared.dir() / "ema.safetensors";
    ChildProcess ema_only({std::getenv("TESSERA_SERVER"), "export", "--state", prepared.state().root().string(),
                           "--version", "1", "--weights", "ema", "--out", ema_out.string()});
    CHECK(ema_only.wait() == 0);
    auto ema = common::read_checkpoint(common::read_file(ema_out, 1 << 30).value()).value();
    REQUIRE(ema.size() * 2 == model.size());
    CHECK(ema[0].name == model[0].name);  // under the model's own names
    ChildProcess bad_weights({std::getenv("TESSERA_SERVER"), "export", "--state", prepared.state().root().string(),
                              "--weights", "best", "--out", ema_out.string()});
    CHECK(bad_weights.wait() == 1);
    ChildProcess missing({std::getenv("TESSERA_SERVER"), "export", "--state", prepared.state().root().string(),
                          "--version", "9", "--out", out.string()});
    CHECK(missing.wait() == 1);
}
