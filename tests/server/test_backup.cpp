// Backups of a live server's state (server/core/state_backup.h): a backup taken while the server
// runs, between checkpoints, restores into a state directory whose server replays the logged
// results to the very model the original has; and the refusals: a backup folder that is not
// empty or not a folder, a state directory that is not one, a backup missing a file a restart
// needs, a restore into a non-empty folder; and a disk that fails mid-copy (files copied through
// the server's FileSystem).
#include <doctest/doctest.h>

#include <fstream>

#include "faulty_file_system.h"
#include "server_fixture.h"
#include "state_backup.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

bool says(const common::Result<BackupReport>& result, const std::string& part) {
    return !result.ok() && result.message().find(part) != std::string::npos;
}

VersionRecord version_of(Store& store, const std::string& task, std::int64_t v) {
    return store.version(task, v).value().value();
}

}  // namespace

TEST_CASE("a backup of a running server restores to the same model, the logged results replayed") {
    auto cadence = [](ServerOptions& options) {
        options.checkpoint_every = 3;
        options.checkpoint_at_stop = true;
    };
    TestServer server([](TaskConfig& c) { c.max_in_flight = 100; }, PolicyKind::FedAsync, cadence);
    TestVolunteer volunteer(server);
    for (std::uint32_t i = 0; i < 5; ++i) {
        auto wu = volunteer.request_work().value();
        REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, i + 1)).status == 200);
        server.app().wait_idle();
    }
    const auto task = server.config().task_id;
    REQUIRE(server.version() == 5);
    CHECK_FALSE(version_of(server.store(), task, 5).checkpoint);  // 4 and 5 live in the results log

    TempDir dir;
    auto backup = back_up_state(server.state(), dir / "backup");  // while it serves
    REQUIRE_MESSAGE(backup.ok(), (backup.ok() ? "" : backup.message()));
    CHECK(backup->tasks == 1);
    CHECK(backup->files > 0);
    CHECK((std::filesystem::status(dir / "backup").permissions() & std::filesystem::perms::others_all) ==
          std::filesystem::perms::none);
    CHECK((std::filesystem::status(dir / "backup" / "server_key.pem").permissions() &
           (std::filesystem::perms::group_all | std::filesystem::perms::others_all)) == std::filesystem::perms::none);

    StateDir restored(dir / "restored");
    auto restore = restore_state(dir / "backup", restored);
    REQUIRE_MESSAGE(restore.ok(), (restore.ok() ? "" : restore.message()));
    server.stop();  // the original writes version 5's checkpoint as it stops
    auto original_v5 = version_of(*Store::open(server.state().database(), false).value(), task, 5);
    REQUIRE(original_v5.state_sha256.has_value());
    {
        ServerOptions options;
        options.state = restored;
        options.http.address = "127.0.0.1";
        options.http.port = 0;
        options.tick_interval_s = 0;
        options.work_threads = 2;
        options.clock = [] { return kStartTime; };
        auto app = ServerApp::start(std::move(options)).value();  // replays versions 4 and 5
        CHECK(app->store().current_task().value()->version == 5);
    }  // and checkpoints version 5 as it stops
    auto restored_v5 = version_of(*Store::open(restored.database(), false).value(), task, 5);
    REQUIRE(restored_v5.state_sha256.has_value());
    CHECK(*restored_v5.state_sha256 == *original_v5.state_sha256);  // bit for bit
}

TEST_CASE("backups refuse folders that are not new, state that is not one, and incomplete backups") {
    TestServer server;
    TempDir dir;
    std::filesystem::create_directories(dir / "full");
    std::ofstream(dir / "full" / "something") << "x";
    CHECK(says(back_up_state(server.state(), dir / "full"), "is not empty"));
    std::ofstream(dir / "a-file") << "x";
    CHECK(says(back_up_state(server.state(), dir / "a-file"), "is not a folder"));
    CHECK(says(back_up_state(StateDir(dir / "nowhere"), dir / "backup"), "is not a server's state directory"));
    // A PostgreSQL database that cannot be reached (its backups: test_postgres_backup.cpp).
    CHECK(says(back_up_state(StateDir(server.state().root(), "postgresql://u@127.0.0.1:1/db"), dir / "backup"),
               "database"));
    CHECK_FALSE(std::filesystem::exists(dir / "backup"));

    REQUIRE(back_up_state(server.state(), dir / "backup").ok());
    CHECK(says(restore_state(dir / "backup", StateDir(dir / "full")), "is not empty"));
    CHECK(says(restore_state(dir / "nowhere", StateDir(dir / "restored")), "is not a backup"));
    // A shard the task needs, gone from the backup: the restore says so and writes nothing.
    auto shard = server.store().shards(server.config().task_id).value().at(0).sha256;
    std::filesystem::remove(dir / "backup" / "blobs" / shard);
    CHECK(says(restore_state(dir / "backup", StateDir(dir / "restored")), "is incomplete"));
    CHECK_FALSE(std::filesystem::exists(dir / "restored"));
}

TEST_CASE("a backup whose disk fails mid-copy says which file and leaves only whole files; the next one completes") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, 1)).status == 200);
    server.app().wait_idle();
    TempDir dir;
    for (auto step : {WriteStep::Create, WriteStep::Write, WriteStep::Rename}) {
        CAPTURE(write_step_name(step));
        FaultyFileSystem files;
        files.fail_writes([&](const std::filesystem::path& path) { return path.parent_path().filename() == "blobs"; },
                          step, 1, "No space left on device");
        auto destination = dir / ("backup-" + std::string(write_step_name(step)));
        auto failed = back_up_state(server.state(), destination, {}, files);
        CHECK(says(failed, "cannot copy"));
        CHECK(says(failed, "No space left on device"));
        // Every file in the backup is a whole copy of the original; no temp file is left.
        for (const auto& entry : std::filesystem::directory_iterator(destination / "blobs")) {
            auto name = entry.path().filename().string();
            CHECK(name.find(".tmp") == std::string::npos);
            CHECK(entry.file_size() == std::filesystem::file_size(server.state().blobs() / name));
        }
    }
    FaultyFileSystem healthy;
    auto backup = back_up_state(server.state(), dir / "backup", {}, healthy);
    REQUIRE_MESSAGE(backup.ok(), (backup.ok() ? "" : backup.message()));
    CHECK(check_restart_files(StateDir(dir / "backup")).ok());
}
