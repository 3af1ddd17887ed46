// The server reaches its state directory only through its FileSystem: listing it for orphan
// files at start, task setup's blobs, the state sizes the dashboard shows, and the blob
// downloads read in pieces. A disk that fails there is reported with its reason — a start that
// stops, a 500 — never ignored or answered from behind the interface.
#include <doctest/doctest.h>

#include <future>
#include <thread>

#include "faulty_file_system.h"
#include "server_core.h"
#include "server_fixture.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::string version0_blob(TestServer& server) {
    auto task = server.store().current_task().value().value();
    return server.store().version(task.id, 0).value().value().blob_sha256;
}

}  // namespace

TEST_CASE("a state directory the server cannot list stops its start, with the reason") {
    FaultyFileSystem files;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&files](ServerOptions& options) { options.file_system = &files; });
    server.stop();
    auto results = server.state().results();
    files.fail_lists([results](const std::filesystem::path& dir) { return dir == results; });
    std::string error;
    try {
        server.start();
    } catch (const std::runtime_error& e) {
        error = e.what();
    }
    CHECK(error.find("looking for orphan files") != std::string::npos);
    CHECK(error.find("injected fault: listing " + results.string()) != std::string::npos);
    CHECK(files.faults_injected() == 1);
    // Once it can be listed, the server starts on the same directory.
    server.start();
    CHECK(http_get(server.port(), "/api/v1/stats").status == 200);
}

TEST_CASE("orphan files are found and removed through the file system") {
    FaultyFileSystem files;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&files](ServerOptions& options) { options.file_system = &files; });
    auto kept = server.state().blobs() / version0_blob(server);
    server.stop();
    auto store = Store::open(server.state().database(), false).value();
    auto orphan_blob = server.state().blobs() / std::string(64, 'a');
    auto orphan_result = server.state().results() / "no-such-unit.delta";
    REQUIRE(posix_file_system().write_atomic(orphan_blob, common::as_bytes(std::string("orphan"))).ok());
    REQUIRE(posix_file_system().write_atomic(orphan_result, common::as_bytes(std::string("orphan"))).ok());
    auto removed = remove_orphan_files(*store, server.state(), files);
    REQUIRE(removed.ok());
    CHECK(*removed == 2);
    CHECK(!files.exists(orphan_blob));
    CHECK(!files.exists(orphan_result));
    CHECK(files.exists(kept));  // referenced
}

TEST_CASE("a blob the disk cannot read is answered 500, and served whole once it can be read") {
    FaultyFileSystem files;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&files](ServerOptions& options) { options.file_system = &files; });
    auto sha = version0_blob(server);
    auto path = server.state().blobs() / sha;
    files.fail_reads([path](const std::filesystem::path& p) { return p == path; });
    auto failed = http_get(server.port(), "/blobs/" + sha);
    CHECK(failed.status == 500);
    CHECK(failed.body.find("cannot read the blob " + sha) != std::string::npos);
    CHECK(files.faults_injected() == 1);

    auto whole = http_get(server.port(), "/blobs/" + sha);
    REQUIRE(whole.status == 200);
    CHECK(common::sha256_hex(common::as_bytes(whole.body)) == sha);
    // A range past the first 64 KiB piece, read at its offset.
    auto first = std::uint64_t{70'000};
    REQUIRE(whole.body.size() > first + 100'000);
    auto range = http_get(server.port(), "/blobs/" + sha,
                          {{"Range", "bytes=" + std::to_string(first) + "-" + std::to_string(first + 99'999)}});
    CHECK(range.status == 206);
    CHECK(range.body == whole.body.substr(first, 100'000));
}

TEST_CASE("a download waiting for the disk holds up no other connection on its I/O thread") {
    FaultyFileSystem files;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&files](ServerOptions& options) {
                          options.file_system = &files;
                          options.io_threads = 1;  // every connection on one thread
                      });
    auto sha = version0_blob(server);
    auto path = server.state().blobs() / sha;
    files.hold_reads([path](const std::filesystem::path& p) { return p == path; });
    auto download = std::async(std::launch::async, [&] { return http_get(server.port(), "/blobs/" + sha); });
    for (int i = 0; i < 2000 && files.held_reads() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(files.held_reads() == 1);
    // The blob's pieces are read on the handler pool: the I/O thread answers others meanwhile.
    auto stats = std::async(std::launch::async, [&] { return http_get(server.port(), "/api/v1/stats"); });
    CHECK(stats.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
    files.release_reads();
    CHECK(stats.get().status == 200);
    auto downloaded = download.get();
    REQUIRE(downloaded.status == 200);
    CHECK(common::sha256_hex(common::as_bytes(downloaded.body)) == sha);
}

TEST_CASE("a task's blobs are written through the given file system: a failed write records no task") {
    FaultyFileSystem files;
    TestServer server;
    auto second = server.config();
    second.task_id = "second";
    second.model = "dit-s";  // a new version 0 checkpoint to write
    auto blobs = server.state().blobs();
    files.fail_writes([blobs](const std::filesystem::path& p) { return p.parent_path() == blobs; }, WriteStep::Rename);
    auto created = create_task(server.state(), server.store(), second, files);
    REQUIRE(!created.ok());
    CHECK(created.message().find("injected fault: rename") != std::string::npos);
    CHECK(!server.store().task("second").value().has_value());
    REQUIRE(create_task(server.state(), server.store(), second, files).ok());
    CHECK(server.store().task("second").value().has_value());
}

TEST_CASE("the state sizes shown are what the file system lists") {
    FaultyFileSystem files;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&files](ServerOptions& options) { options.file_system = &files; });
    auto listed = state_usage(server.state(), files);
    CHECK(listed.blobs > 0);
    CHECK(listed.database > 0);
    auto blobs = server.state().blobs();
    files.fail_lists([blobs](const std::filesystem::path& dir) { return dir == blobs; });
    auto unlisted = state_usage(server.state(), files);
    CHECK(unlisted.blobs == 0);
    CHECK(unlisted.database == listed.database);
}
