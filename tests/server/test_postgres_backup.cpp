// Backups of a server on PostgreSQL, for real: the tessera-server binary backs a running
// server's state up with pg_dump, restores it with pg_restore into an empty database of a
// private cluster, and a server started on the restored state serves the run at the same
// version and model. And the refusals: a PostgreSQL backup without a database to restore into,
// a database that is not empty, a SQLite backup given one.
#include <doctest/doctest.h>

#include "postgres_cluster.h"
#include "server_process.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Runs `tessera-server ARGS...`: its exit status, and what it wrote (standard error too) in
// `output`.
int run_server(std::vector<std::string> args, std::string& output) {
    args.insert(args.begin(), {"/bin/sh", "-c", "exec \"$0\" \"$@\" 2>&1", required_env("TESSERA_SERVER")});
    ChildProcess process(args);
    output.clear();
    for (std::string line; !(line = process.read_line()).empty();) output += line + "\n";
    return process.wait();
}

std::string pg_bin() { return required_env("TESSERA_PG_BIN"); }

server::VersionRecord newest_version(const std::string& url) {
    auto store = server::Store::connect(url, false).value();
    auto task = store->current_task().value().value();
    return store->version(task.id, task.version).value().value();
}

}  // namespace

TEST_CASE("a server on PostgreSQL is backed up while it runs and restored into an empty database") {
    PostgresCluster cluster;
    const auto url = cluster.create_database("original");
    PreparedState prepared({}, url);
    auto server = std::make_unique<ServerProcess>(prepared.state(), std::vector<std::string>{"--work-threads", "2"});
    TestVolunteer volunteer([&] { return server->port(); }, wall_clock, "backup volunteer");
    for (std::uint32_t i = 0; i < 4; ++i) {
        auto unit = volunteer.request_work().value();
        REQUIRE(volunteer.upload(unit, volunteer.made_up_delta(unit, 1e-3f, i + 1)).status == 200);
    }
    REQUIRE(wait_for([&] { return newest_version(url).version == 4; }, std::chrono::seconds(60)));

    TempDir dir;
    std::string output;
    REQUIRE_MESSAGE(run_server({"backup", "--state", prepared.state().root().string(), "--db", url, "--to",
                                (dir / "backup").string(), "--pg-bin", pg_bin()},
                               output) == 0,
                    output);
    CHECK(output.find("1 task(s)") != std::string::npos);
    CHECK(std::filesystem::exists(dir / "backup" / "server.pgdump"));
    CHECK_FALSE(std::filesystem::exists(dir / "backup" / "server.db"));
    CHECK((std::filesystem::status(dir / "backup" / "server.pgdump").permissions() &
           (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) == std::filesystem::perms::none);
    const auto original = newest_version(url);
    server.reset();  // the original stops; the backup is all there is

    // Refused, and nothing written: no database named, one that is not empty.
    CHECK(run_server({"restore", "--from", (dir / "backup").string(), "--state", (dir / "nowhere").string()}, output) ==
          1);
    CHECK(output.find("holds a PostgreSQL dump") != std::string::npos);
    CHECK(run_server({"restore", "--from", (dir / "backup").string(), "--state", (dir / "nowhere").string(), "--db",
                      url, "--pg-bin", pg_bin()},
                     output) == 1);
    CHECK(output.find("holds a server's tables already") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "nowhere"));

    const auto restored_url = cluster.create_database("restored");
    server::StateDir restored(dir / "restored", restored_url);
    REQUIRE_MESSAGE(run_server({"restore", "--from", (dir / "backup").string(), "--state", restored.root().string(),
                                "--db", restored_url, "--pg-bin", pg_bin()},
                               output) == 0,
                    output);
    auto copy = newest_version(restored_url);
    CHECK(copy.version == original.version);
    CHECK(copy.blob_sha256 == original.blob_sha256);  // the same model, file and row

    // A server on the restored state serves the run where it was, and merges on from there.
    ServerProcess again(restored, {"--work-threads", "2"});
    TestVolunteer later([&] { return again.port(); }, wall_clock, "after the restore");
    auto unit = later.request_work().value();
    CHECK(unit.base_version == original.version);
    REQUIRE(later.upload(unit, later.made_up_delta(unit, 1e-3f, 9)).status == 200);
    CHECK(wait_for([&] { return newest_version(restored_url).version == original.version + 1; },
                   std::chrono::seconds(60)));
}

TEST_CASE("a SQLite backup is not restored into a PostgreSQL database") {
    PostgresCluster cluster;
    PreparedState prepared;
    TempDir dir;
    std::string output;
    REQUIRE_MESSAGE(
        run_server({"backup", "--state", prepared.state().root().string(), "--to", (dir / "backup").string()},
                   output) == 0,
        output);
    CHECK(run_server({"restore", "--from", (dir / "backup").string(), "--state", (dir / "restored").string(), "--db",
                      cluster.create_database("target")},
                     output) == 1);
    CHECK(output.find("holds a SQLite database") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir / "restored"));
}
