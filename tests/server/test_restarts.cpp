// Restarts with a manual clock: buffered and momentum policies resume where the database says,
// the transitioner keeps its period, the schema is applied once and migrated, and start-up
// removes orphan files.
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "checkpoint.h"
#include "file_io.h"
#include "model_patch.h"
#include "polling.h"
#include "server_fixture.h"
#include "sha256.h"
#include "sqlite_database.h"

using namespace tessera;
using namespace tessera::testing;

TEST_CASE("fedbuff merges K results into one version and resumes its buffer after a restart") {
    TestServer server([](TaskConfig& c) { c.merge.buffer_size = 2; }, PolicyKind::FedBuff);
    TestVolunteer volunteer(server);
    auto a = volunteer.request_work().value();
    REQUIRE(volunteer.upload(a, volunteer.made_up_delta(a, 1e-3f, 1)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, a.wu_id) == "accepted");
    CHECK(server.version() == 0);

    server.stop();
    server.start();  // the accepted result is replayed into the buffer
    auto b = volunteer.request_work().value();
    REQUIRE(volunteer.upload(b, volunteer.made_up_delta(b, 1e-3f, 2)).status == 200);
    server.app().wait_idle();
    CHECK(server.version() == 1);
    CHECK(state_of(server, a.wu_id) == "merged");
    CHECK(state_of(server, b.wu_id) == "merged");
    CHECK(server.store().version(server.config().task_id, 1).value()->merged_results == 2);
}

TEST_CASE("diloco keeps its momentum with each version and reloads it on restart") {
    TestServer server([](TaskConfig& c) { c.merge.buffer_size = 1; }, PolicyKind::DiLoCo);
    TestVolunteer volunteer(server);
    for (std::uint32_t i = 0; i < 2; ++i) {
        auto wu = volunteer.request_work().value();
        REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, i + 1)).status == 200);
        server.app().wait_idle();
    }
    REQUIRE(server.version() == 2);
    server.stop();  // version 2 becomes a checkpoint, with the momentum
    auto store = Store::open(server.state().database(), false).value();
    auto v2 = store->version(server.config().task_id, 2).value();
    REQUIRE(v2->optimizer_sha256.has_value());
    CHECK(v2->checkpoint);
    CHECK(std::filesystem::exists(server.state().blobs() / *v2->optimizer_sha256));
    store.reset();
    server.start();
    auto wu = volunteer.request_work().value();
    CHECK(wu.base_version == 2);
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, 3)).status == 200);
    server.app().wait_idle();
    CHECK(server.version() == 3);
}

TEST_CASE("diloco-dn saves its momentum, gathered sum and count mid-period and continues after a restart") {
    TestServer server([](TaskConfig& c) { c.merge.buffer_size = 2; }, PolicyKind::DiLoCoDN);
    TestVolunteer volunteer(server);
    for (std::uint32_t i = 0; i < 3; ++i) {
        auto wu = volunteer.request_work().value();
        REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, i + 1)).status == 200);
        server.app().wait_idle();
    }
    REQUIRE(server.version() == 3);  // every arrival is a version, the momentum stepped at the second
    server.stop();
    auto store = Store::open(server.state().database(), false).value();
    auto v3 = store->version(server.config().task_id, 3).value();
    REQUIRE(v3->optimizer_sha256.has_value());
    auto bytes = common::read_file(server.state().blobs() / *v3->optimizer_sha256, 1 << 30).value();
    auto state = common::read_checkpoint(bytes).value();
    const auto count =
        std::find_if(state.begin(), state.end(), [](const auto& t) { return t.name == "pending_count"; });
    REQUIRE(count != state.end());
    CHECK(count->values == std::vector<float>{1.0f});  // one arrival gathered towards the next step
    store.reset();
    server.start();
    auto wu = volunteer.request_work().value();
    CHECK(wu.base_version == 3);
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, 4)).status == 200);
    server.app().wait_idle();
    CHECK(server.version() == 4);
}

TEST_CASE("the transitioner ticks on its period, not whenever the work pool finishes a job") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) { options.tick_interval_s = 3600; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto overdue = alice.request_work().value();
    server.advance(server.config().deadline_s + 1);
    for (int i = 0; i < 3; ++i) {  // validations and evaluations: jobs on the pool
        auto wu = bob.request_work().value();
        REQUIRE(bob.upload(wu, bob.made_up_delta(wu, 1e-3f, static_cast<std::uint32_t>(i + 1))).status == 200);
        server.app().wait_idle();
    }
    CHECK(state_of(server, overdue.wu_id) == "in_progress");  // no tick within the hour
    CHECK(server.app().transitioner().tick().value().timed_out == 1);
}

TEST_CASE("the store applies its schema once and refuses a database from a newer server") {
    TempDir dir;
    auto path = dir / "server.db";
    {
        auto store = Store::open(path, true).value();
        CHECK(store->schema_version().value() == Store::kSchemaVersion);
        REQUIRE(store->set_setting("k", "v"));
    }
    {
        auto store = Store::open(path, false).value();  // reopening keeps the data
        CHECK(store->setting("k").value().value() == "v");
    }
    {
        SqliteDatabase db(path, false);
        db.exec("PRAGMA user_version = 99");
    }
    auto newer = Store::open(path, false);
    REQUIRE(!newer.ok());
    CHECK(newer.message().find("newer") != std::string::npos);
    auto missing = Store::open(dir / "absent.db", false);
    REQUIRE(!missing.ok());
    CHECK(missing.message().find("tessera-server init") != std::string::npos);
}

TEST_CASE(
    "a schema-1 database is migrated: versions keep their figures and gain a sample size, indexes, the checks', "
    "the patches' and the checkpoints' columns, the leases, the task's volunteers, the commitments, the twins' "
    "moments, the loss-check units' columns") {
    TestServer server;
    TestVolunteer alice(server, "alice");
    REQUIRE(alice.request_work());
    server.stop();
    auto path = server.state().database();
    auto indexes = [&] {
        SqliteDatabase db(path, false);
        Statement query(db,
                        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name IN "
                        "('work_units_open', 'clients_by_last_seen', 'request_nonces_by_time', "
                        "'assignments_by_acceptance', 'clients_by_address', 'rejections_by_client', "
                        "'model_versions_by_blob', 'assignments_by_return', 'task_volunteers_by_issue', "
                        "'events_by_kind')");
        query.step();
        return query.integer(0);
    };
    CHECK(indexes() == 10);
    {
        SqliteDatabase db(path,
                          false);  // back to schema 1: no sample size, no indexes of schemas 3 and 4, no check columns
        db.exec(
            "DROP INDEX clients_by_address; DROP INDEX rejections_by_client; "
            "ALTER TABLE clients DROP COLUMN quarantined; ALTER TABLE clients DROP COLUMN address; "
            "ALTER TABLE assignments DROP COLUMN gain_per_step; "
            "ALTER TABLE model_versions DROP COLUMN validation_samples; "
            "ALTER TABLE model_versions DROP COLUMN validation_full; DROP INDEX work_units_open; "
            "DROP INDEX clients_by_last_seen; DROP INDEX request_nonces_by_time; DROP INDEX assignments_by_acceptance; "
            "DROP INDEX model_versions_by_blob; ALTER TABLE model_versions DROP COLUMN state_sha256; "
            "ALTER TABLE model_versions DROP COLUMN patch_sha256; ALTER TABLE model_versions DROP COLUMN patch_bytes; "
            "ALTER TABLE model_versions DROP COLUMN checkpoint; ALTER TABLE model_versions DROP COLUMN pinned; "
            "DROP TABLE leases; ALTER TABLE tasks DROP COLUMN weight; ALTER TABLE assignments DROP COLUMN alignment; "
            "ALTER TABLE assignments DROP COLUMN concurrency; ALTER TABLE assignments DROP COLUMN full_rate_steps; "
            "ALTER TABLE assignments DROP COLUMN claimed_by; ALTER TABLE assignments DROP COLUMN claimed_until; "
            "ALTER TABLE assignments DROP COLUMN commitments; DROP INDEX assignments_by_return; "
            "DROP TABLE task_volunteers; ALTER TABLE work_units DROP COLUMN trusted_only; DROP INDEX events_by_kind; "
            "ALTER TABLE work_units DROP COLUMN moments_sha256; ALTER TABLE work_units DROP COLUMN moments_bytes; "
            "ALTER TABLE work_units DROP COLUMN checks; ALTER TABLE work_units DROP COLUMN checks_client; "
            "ALTER TABLE work_units DROP COLUMN check_spec; PRAGMA user_version = 1;");
    }
    CHECK(indexes() == 0);
    auto store = Store::open(path, false).value();
    CHECK(store->schema_version().value() == Store::kSchemaVersion);
    CHECK(indexes() == 10);
    auto client = store->register_client("a key", "old volunteer", "0.1.0", "192.0.2.7", 100).value().value();
    CHECK(!client.quarantined);
    CHECK(store->registrations_from("192.0.2.7", 0).value() == 1);
    auto task = store->current_task().value().value();
    auto v0 = store->version(task.id, 0).value().value();
    CHECK(v0.validation_loss.has_value());  // evaluated before the migration, kept
    CHECK(!v0.validation_samples.has_value());
    CHECK(!v0.validation_full);
    CHECK(!v0.patch_sha256.has_value());
    CHECK(v0.patch_bytes == 0);
    CHECK(v0.checkpoint);  // every version before schema 6 was written in full
    CHECK(!v0.pinned);
    REQUIRE(store->set_validation_result(task.id, 0, {1.5, std::nullopt, 128, true}));
    auto after = store->version(task.id, 0).value().value();
    CHECK(after.validation_samples.value() == 128);
    CHECK(after.validation_full);
    CHECK(store->claim_lease({"aggregator:" + task.id, "me"}, 100, 115).value());  // schema 7's table
    CHECK(store->result_claim_holders().value().empty());                          // schema 11's columns
    CHECK(store->task_volunteers(task.id, 0).value() == 1);  // schema 12's table, filled from the assignments
    CHECK(!store->commitments_of("none").value().has_value());  // schema 13's column
    CHECK(!store->make_audit_twin("none").value());             // schema 14's column
    CHECK(store->event_counts({"audit_failed"}).value().at("audit_failed") == 0);  // schema 15's index
    CHECK(!store->moments_in_use(std::string(64, 'a')).value());                   // schema 16's columns
    CHECK(!store->make_audit_twin("none", std::string(64, 'a'), 8).value());
    CHECK(!store->work_unit("none").value().has_value());  // schema 17's columns
}

TEST_CASE("start-up removes orphan files: uncommitted checkpoints and stray deltas") {
    TestServer server;
    server.stop();
    auto orphan_blob = server.state().blobs() / std::string(64, 'e');
    auto temp_blob = server.state().blobs() / (std::string(64, 'f') + ".tmp-1234");
    auto stray_delta = server.state().result_file("a-gone");
    for (const auto& path : {orphan_blob, temp_blob, stray_delta})
        REQUIRE(common::write_file_atomic(path, common::as_bytes("x")));
    server.start();
    CHECK(!std::filesystem::exists(orphan_blob));
    CHECK(!std::filesystem::exists(temp_blob));
    CHECK(!std::filesystem::exists(stray_delta));
    auto version0 = server.store().version(server.config().task_id, 0).value();
    CHECK(std::filesystem::exists(server.state().blobs() / version0->blob_sha256));
}
