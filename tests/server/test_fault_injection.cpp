// Failure atomicity under injected faults, with a full checkpoint at every version (the
// checkpoint cadence and its replay: test_checkpoints.cpp). Writing a new version can fail at
// any step of its checkpoint blob (create, write, fsync, rename, the directory's fsync) or at its database row;
// each must leave the model as it was and merge the results again exactly once, in place after
// the retry or after a restart. Every run's final checkpoint is compared, byte for byte, with
// the same results merged by a server without faults. A result file that cannot be written
// is not acknowledged (503 `storage_full` when the disk is full), nor is one whose upload could
// not be spooled; a validation that fails with an error is tried again.
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <iostream>
#include <sstream>
#include <thread>

#include "faulty_file_system.h"
#include "process_holder.h"
#include "server_fixture.h"
#include "sqlite_database.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr int kResults = 4;

// A fault-injecting server whose aggregator retries after `retry_s`; fedbuff merges in pairs.
std::unique_ptr<TestServer> server_with(FaultyFileSystem& faults, PolicyKind policy, double retry_s = 0.01) {
    return std::make_unique<TestServer>(
        [policy](TaskConfig& config) {
            if (policy == PolicyKind::FedBuff) config.merge.buffer_size = 2;
        },
        policy,
        [&faults, retry_s](ServerOptions& options) {
            options.file_system = &faults;
            options.merge_retry_s = retry_s;
            options.checkpoint_every = 1;  // every commit writes whole files, the steps under test
        });
}

// Result `i` (0-based) of the run: a made-up Δ with its own seed.
void deliver(TestServer& server, TestVolunteer& volunteer, int i, bool wait = true) {
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, static_cast<std::uint32_t>(i + 1))).status == 200);
    if (wait) server.app().wait_idle();
}

std::string newest_checkpoint(TestServer& server) {
    auto task = server.store().current_task().value().value();
    return server.store().version(task.id, task.version).value().value().blob_sha256;
}

// The checkpoint kResults results make on a server without faults.
std::string clean_checkpoint(PolicyKind policy) {
    FaultyFileSystem no_faults;
    auto server = server_with(no_faults, policy);
    TestVolunteer volunteer(*server);
    for (int i = 0; i < kResults; ++i) deliver(*server, volunteer, i);
    return newest_checkpoint(*server);
}

std::int64_t commit_failures(TestServer& server) {
    auto page = http_get(server.port(), "/metrics").body;
    const std::string name = "\ntessera_commit_failures_total ";
    auto at = page.find(name);
    REQUIRE(at != std::string::npos);
    return std::stoll(page.substr(at + name.size()));
}

std::int64_t merged_results(TestServer& server) { return server.store().counts(0).value().assignments["merged"]; }

// Results 2… of the run, then what every faulted run must end with: each result merged once,
// and the checkpoint of the run without faults.
void deliver_rest_and_compare(TestServer& server, TestVolunteer& volunteer, const std::string& clean) {
    for (int i = 2; i < kResults; ++i) deliver(server, volunteer, i);
    CHECK(merged_results(server) == kResults);
    CHECK(newest_checkpoint(server) == clean);
}

bool in_blobs(const TestServer& server, const std::filesystem::path& path) {
    return path.parent_path() == server.state().blobs();
}

// Matches the server's stored result files.
FaultyFileSystem::PathMatch result_files_of(const TestServer& server) {
    return [&server](const std::filesystem::path& path) { return path.parent_path() == server.state().results(); };
}

template <typename Condition>
bool eventually(Condition condition) {
    for (int i = 0; i < 3000; ++i) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

}  // namespace

TEST_CASE("a checkpoint write that fails at any step loses no result and applies none twice") {
    for (auto policy : {PolicyKind::FedAsync, PolicyKind::FedBuff}) {
        auto clean = clean_checkpoint(policy);
        for (auto step :
             {WriteStep::Create, WriteStep::Write, WriteStep::Sync, WriteStep::Rename, WriteStep::SyncDirectory}) {
            CAPTURE(policy_name(policy));
            CAPTURE(write_step_name(step));
            FaultyFileSystem faults;
            auto server = server_with(faults, policy);
            TestVolunteer volunteer(*server);
            for (int i = 0; i < kResults; ++i) {
                // The last commit fails: for fedbuff, with two results in it.
                if (i == kResults - 1)
                    faults.fail_writes([&](const auto& path) { return in_blobs(*server, path); }, step);
                deliver(*server, volunteer, i);
            }
            CHECK(faults.faults_injected() == 1);
            CHECK(commit_failures(*server) == 1);
            CHECK(merged_results(*server) == kResults);
            CHECK(server->version() == (policy == PolicyKind::FedBuff ? kResults / 2 : kResults));
            CHECK(newest_checkpoint(*server) == clean);
        }
    }
}

TEST_CASE("a version row that cannot be written: the results are merged once it can") {
    auto clean = clean_checkpoint(PolicyKind::FedAsync);
    FaultyFileSystem no_faults;
    auto server = server_with(no_faults, PolicyKind::FedAsync, 0.02);
    TestVolunteer volunteer(*server);
    deliver(*server, volunteer, 0);
    SqliteDatabase db(server->state().database(), false);
    db.exec(
        "CREATE TRIGGER injected_fault BEFORE INSERT ON model_versions "
        "BEGIN SELECT RAISE(ABORT, 'injected fault'); END;");
    deliver(*server, volunteer, 1, false);
    REQUIRE(eventually([&] { return commit_failures(*server) >= 2; }));  // retried, and failed again
    CHECK(server->version() == 1);
    db.exec("DROP TRIGGER injected_fault");
    server->app().wait_idle();
    CHECK(server->version() == 2);
    deliver_rest_and_compare(*server, volunteer, clean);
}

TEST_CASE("a commit that failed before a restart is merged once after it") {
    auto clean = clean_checkpoint(PolicyKind::FedAsync);
    FaultyFileSystem faults;
    auto server = server_with(faults, PolicyKind::FedAsync, 3600);  // no retry before the restart
    TestVolunteer volunteer(*server);
    deliver(*server, volunteer, 0);
    faults.fail_writes([&](const auto& path) { return in_blobs(*server, path); }, WriteStep::Rename);
    deliver(*server, volunteer, 1, false);
    REQUIRE(eventually([&] { return commit_failures(*server) == 1; }));
    server->stop();
    server->start();
    server->app().wait_idle();
    CHECK(server->version() == 2);
    deliver_rest_and_compare(*server, volunteer, clean);
}

TEST_CASE("a result file that cannot be written is not acknowledged, and the upload can be repeated") {
    FaultyFileSystem faults;
    auto server = server_with(faults, PolicyKind::FedAsync);
    TestVolunteer volunteer(*server);
    auto wu = volunteer.request_work().value();
    faults.fail_writes(result_files_of(*server), WriteStep::Sync);
    auto delta = volunteer.made_up_delta(wu, 1e-3f);
    auto refused = volunteer.upload(wu, delta);
    CHECK(refused.status == 500);
    CHECK(state_of(*server, wu.wu_id) == "in_progress");
    CHECK(!std::filesystem::exists(server->state().result_file(wu.wu_id)));
    REQUIRE(volunteer.upload(wu, delta).status == 200);
    server->app().wait_idle();
    CHECK(state_of(*server, wu.wu_id) == "merged");
    CHECK(server->version() == 1);
}

TEST_CASE(
    "an upload whose spool file cannot be created or written is refused as the server's fault and leaves no file") {
    FaultyFileSystem faults;
    auto server = server_with(faults, PolicyKind::FedAsync);
    TestVolunteer volunteer(*server);
    auto wu = volunteer.request_work().value();
    auto delta = volunteer.made_up_delta(wu, 1e-3f);
    auto left_in_results = [&] {
        std::size_t files = 0;
        for (const auto& entry : std::filesystem::directory_iterator(server->state().results())) {
            (void)entry;
            ++files;
        }
        return files;
    };

    faults.fail_writes(result_files_of(*server), WriteStep::Create);
    auto uncreated = volunteer.upload(wu, delta);
    CHECK(uncreated.status == 500);
    CHECK(uncreated.body.find("injected fault: create") != std::string::npos);
    faults.fail_writes(result_files_of(*server), WriteStep::Write, 1, "No space left on device");
    auto unwritten = volunteer.upload(wu, delta);
    CHECK(unwritten.status == 503);  // a full disk: storage_full, try again later
    CHECK(unwritten.body.find("\"storage_full\"") != std::string::npos);
    CHECK(faults.faults_injected() == 2);
    CHECK(state_of(*server, wu.wu_id) == "in_progress");
    CHECK(left_in_results() == 0);  // the half-written spool file went with its upload

    REQUIRE(volunteer.upload(wu, delta).status == 200);
    server->app().wait_idle();
    CHECK(state_of(*server, wu.wu_id) == "merged");
}

TEST_CASE("an exception inside a request is answered 500 with an incident number; its text goes to the log only") {
    FaultyFileSystem faults;
    auto server = server_with(faults, PolicyKind::FedAsync);
    TestVolunteer volunteer(*server);
    auto wu = volunteer.request_work().value();
    faults.throw_on_write(result_files_of(*server), "a library's words with /a/private/path in them");
    auto delta = volunteer.made_up_delta(wu, 1e-3f);
    std::ostringstream log;
    auto* standard_error = std::cerr.rdbuf(log.rdbuf());
    auto refused = volunteer.upload(wu, delta);
    std::cerr.rdbuf(standard_error);
    CHECK(refused.status == 500);
    CHECK(refused.body.find("/a/private/path") == std::string::npos);
    CHECK(refused.body.find("incident") != std::string::npos);
    CHECK(log.str().find("incident") != std::string::npos);
    CHECK(log.str().find("/a/private/path") != std::string::npos);
    CHECK(faults.faults_injected() == 1);
    CHECK(state_of(*server, wu.wu_id) == "in_progress");  // nothing taken: the upload can be repeated
    REQUIRE(volunteer.upload(wu, delta).status == 200);
    server->app().wait_idle();
    CHECK(server->version() == 1);
}

namespace {

// A server holding one result left `returned`: its validation failed on an unreadable file.
struct UnvalidatedResult {
    std::unique_ptr<TestServer> server;
    std::string wu_id;
};
UnvalidatedResult unvalidated_result(FaultyFileSystem& faults) {
    UnvalidatedResult made{server_with(faults, PolicyKind::FedAsync), ""};
    auto& server = *made.server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    made.wu_id = wu.wu_id;
    faults.fail_reads([results = server.state().results()](const auto& path) { return path.parent_path() == results; });
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 200);
    server.app().wait_idle();
    CHECK(faults.faults_injected() == 1);
    CHECK(state_of(server, wu.wu_id) == "returned");  // no verdict: the error was not the result's
    return made;
}

}  // namespace

TEST_CASE("a result left unvalidated at a graceful stop is validated at the next start, its claim given up") {
    FaultyFileSystem faults;
    auto [server, wu_id] = unvalidated_result(faults);
    CHECK(server->store().result_claim_holders().value().size() == 1);  // this process's
    server->stop();
    server->start();  // the same clock: no claim has lapsed
    server->app().wait_idle();
    CHECK(state_of(*server, wu_id) == "merged");
}

TEST_CASE("a claim holder is known gone only when it is a process of this host that exited") {
    pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) ::_exit(0);
    REQUIRE(::waitpid(child, nullptr, 0) == child);
    auto me = process_holder_name();
    auto host = me.substr(0, me.find(':'));
    CHECK(!holder_gone(me));
    CHECK(holder_gone(host + ":" + std::to_string(child) + ":0badc0de"));
    CHECK(!holder_gone("another-host-" + host + ":" + std::to_string(child) + ":0badc0de"));
    CHECK(!holder_gone(host + ":not-a-pid:0badc0de"));
    CHECK(!holder_gone("no colons"));
}

TEST_CASE("a result whose claim lapsed while it waited for a validator is left to the process that took it") {
    FaultyFileSystem faults;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&faults](ServerOptions& options) {
                          options.file_system = &faults;
                          options.validation_threads = 1;  // one at a time: the second waits for the first
                      });
    TestVolunteer volunteer(server);
    auto first = volunteer.request_work().value();
    auto second = volunteer.request_work().value();
    faults.hold_reads([results = server.state().results()](const auto& path) { return path.parent_path() == results; });
    REQUIRE(volunteer.upload(first, volunteer.made_up_delta(first, 1e-3f)).status == 200);
    for (int i = 0; i < 500 && faults.held_reads() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(faults.held_reads() == 1);  // the first validation reads its delta, held
    REQUIRE(volunteer.upload(second, volunteer.made_up_delta(second, 1e-3f)).status == 200);  // queued behind it
    server.advance(kValidationClaimS + 1);
    auto taken = server.store().claim_returned({"another-process", server.now() + kValidationClaimS}, server.now(), 10);
    CHECK(taken.value().size() == 2);  // both claims lapsed: another process takes them
    faults.release_reads();
    server.app().wait_idle();
    CHECK(state_of(server, first.wu_id) == "merged");     // its validation had begun: its verdict stands
    CHECK(state_of(server, second.wu_id) == "returned");  // not validated here: the other process's
    CHECK(server.store().result_claim_holders().value() == std::vector<std::string>{"another-process"});
    // Once that process gives it up, this one claims it and validates it.
    CHECK(server.store().release_result_claims("another-process").value() == 1);
    CHECK(server.app().validation().poll().value() == 1);
    server.app().wait_idle();
    CHECK(state_of(server, second.wu_id) == "merged");
}

TEST_CASE("validations run on threads of their own: two at once beside one work thread") {
    // A validation mostly waits (here: on a held read of its delta); the work pool's one thread
    // for LibTorch's work does not limit how many wait at once.
    FaultyFileSystem faults;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&faults](ServerOptions& options) {
                          options.file_system = &faults;
                          options.work_threads = 1;
                          options.validation_threads = 2;
                      });
    TestVolunteer volunteer(server);
    auto first = volunteer.request_work().value();
    auto second = volunteer.request_work().value();
    faults.hold_reads([results = server.state().results()](const auto& path) { return path.parent_path() == results; });
    REQUIRE(volunteer.upload(first, volunteer.made_up_delta(first, 1e-3f)).status == 200);
    REQUIRE(volunteer.upload(second, volunteer.made_up_delta(second, 1e-3f)).status == 200);
    for (int i = 0; i < 500 && faults.held_reads() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(faults.held_reads() == 2);
    faults.release_reads();
    server.app().wait_idle();
    CHECK(state_of(server, first.wu_id) == "merged");
    CHECK(state_of(server, second.wu_id) == "merged");
}

TEST_CASE(
    "an upload's spool file is created and written off the I/O thread: while its disk waits, others are answered") {
    FaultyFileSystem faults;
    TestServer server([](TaskConfig&) {}, PolicyKind::FedAsync,
                      [&faults](ServerOptions& options) {
                          options.file_system = &faults;
                          options.io_threads = 1;  // were the spool written on it, nothing else would be read meanwhile
                      });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    faults.hold_creates(
        [results = server.state().results()](const auto& path) { return path.parent_path() == results; });
    int uploaded = 0;
    std::thread uploader([&] { uploaded = volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status; });
    for (int i = 0; i < 500 && faults.held_creates() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(faults.held_creates() == 1);  // the spool file's create waits on the handler pool
    CHECK(http_get(server.port(), "/api/v1/server").status == 200);  // the one I/O thread still serves
    faults.release_creates();
    uploader.join();
    CHECK(uploaded == 200);
    server.app().wait_idle();
    CHECK(state_of(server, wu.wu_id) == "merged");
}

TEST_CASE("a full disk is answered 503 storage_full with Retry-After, and the upload succeeds once space returns") {
    FaultyFileSystem faults;
    auto server = server_with(faults, PolicyKind::FedAsync);
    TestVolunteer volunteer(*server);
    auto wu = volunteer.request_work().value();
    faults.fail_writes(result_files_of(*server), WriteStep::Rename, 1, "No space left on device");
    auto refused = volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f));
    CHECK(refused.status == 503);
    CHECK(refused.body.find("\"storage_full\"") != std::string::npos);
    CHECK(refused.headers["retry-after"] == "60");
    CHECK(state_of(*server, wu.wu_id) == "in_progress");
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 200);
    server->app().wait_idle();
    CHECK(state_of(*server, wu.wu_id) == "merged");
}

TEST_CASE("a validation that fails with an error is tried again once its claim lapses") {
    FaultyFileSystem faults;
    auto [server, wu_id] = unvalidated_result(faults);
    CHECK(server->app().validation().poll().value() == 0);  // still this process's claim
    server->advance(kValidationClaimS + 1);
    CHECK(server->app().validation().poll().value() == 1);
    server->app().wait_idle();
    CHECK(state_of(*server, wu_id) == "merged");
    CHECK(server->version() == 1);
}
