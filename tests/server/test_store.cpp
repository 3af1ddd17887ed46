// The store suite, run against both back ends (store_backends.h): schema and settings,
// clients, tasks and versions, leases, the work-unit lifecycle, PostgreSQL's reconnection.
// Concurrent writers and claims: test_store_concurrency.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "database.h"
#include "store_backends.h"
#include "store_internal.h"

using namespace tessera::server;
using namespace tessera::testing::store_backends;
using tessera::testing::TempDir;

TEST_CASE("the schema is applied once, settings persist, and a newer schema is refused") {
    on_each_backend([](Backend& b) {
        CHECK(b.store->schema_version().value() == Store::kSchemaVersion);
        CHECK(b.store->database_bytes().value() > 0);
        REQUIRE(b.store->set_setting("k", "v"));
        REQUIRE(b.store->set_setting("k", "w"));  // replaced, not duplicated
        b.store.reset();
        b.store = b.reopen();
        CHECK(b.store->setting("k").value().value() == "w");
        CHECK(!b.store->setting("absent").value().has_value());
        {
            auto db = open_database(b.url, false);
            db->begin();
            db->set_schema_version(99);
            db->exec("COMMIT");
        }
        b.store.reset();
        auto newer = Store::connect(b.url, false);
        REQUIRE(!newer.ok());
        CHECK(newer.message().find("newer") != std::string::npos);
    });
}

// Schema 17's columns, dropped to make an older database.
constexpr const char* kDropCheckColumns =
    "ALTER TABLE work_units DROP COLUMN checks; ALTER TABLE work_units DROP COLUMN checks_client; "
    "ALTER TABLE work_units DROP COLUMN check_spec;";

TEST_CASE(
    "a schema-6 database gains the leases table, the tasks' weights and the results' alignment, concurrency, "
    "steps at the full rate, validation claims and commitments, the task's volunteers, the audit twins' flag, "
    "the events' index by kind, the twins' moments and the loss-check units' columns; a schema-15 one the twins' "
    "moments and those columns, a schema-16 one those columns") {
    on_each_backend([](Backend& b) {
        REQUIRE(b.store->claim_lease({"aggregator:t", "a"}, 100, 115).value());
        b.store.reset();
        {
            auto db = open_database(b.url, false);
            db->begin();
            db->exec(
                "DROP TABLE leases; ALTER TABLE tasks DROP COLUMN weight; ALTER TABLE assignments DROP COLUMN "
                "alignment; "
                "ALTER TABLE assignments DROP COLUMN concurrency; ALTER TABLE assignments DROP COLUMN full_rate_steps; "
                "ALTER TABLE assignments DROP COLUMN claimed_by; ALTER TABLE assignments DROP COLUMN claimed_until; "
                "ALTER TABLE assignments DROP COLUMN commitments; DROP INDEX assignments_by_return; "
                "DROP TABLE task_volunteers; ALTER TABLE work_units DROP COLUMN trusted_only; DROP INDEX "
                "events_by_kind; ALTER TABLE work_units DROP COLUMN moments_sha256; ALTER TABLE work_units DROP "
                "COLUMN moments_bytes; " +
                std::string(kDropCheckColumns));
            db->set_schema_version(6);
            db->exec("COMMIT");
        }
        b.store = b.reopen();
        CHECK(b.store->schema_version().value() == Store::kSchemaVersion);
        CHECK(!b.store->lease("aggregator:t").value().has_value());
        CHECK(b.store->claim_lease({"aggregator:t", "b"}, 100, 115).value());
        make_task(*b.store, "t", 50);
        CHECK(b.store->task("t").value()->weight == 1);
        CHECK(b.store->recent_norms_per_step("t", 10).value().empty());  // reads full_rate_steps
        CHECK(b.store->result_claim_holders().value().empty());          // reads claimed_by
        CHECK(b.store->task_volunteers("t", 0).value() == 0);            // schema 12's table
        CHECK(!b.store->commitments_of("none").value().has_value());     // schema 13's column
        CHECK(!b.store->make_audit_twin("none").value());                // schema 14's column
        CHECK(!b.store->moments_in_use(std::string(64, 'a')).value());   // schema 16's columns
        CHECK(!b.store->work_unit("none").value().has_value());          // reads schema 17's
        b.store.reset();
        {  // at schema 15: the events' index there, the twins' moments not
            auto db = open_database(b.url, false);
            db->begin();
            db->exec(
                "ALTER TABLE work_units DROP COLUMN moments_sha256; ALTER TABLE work_units DROP COLUMN "
                "moments_bytes; " +
                std::string(kDropCheckColumns));
            db->set_schema_version(15);
            db->exec("COMMIT");
        }
        b.store = b.reopen();
        CHECK(b.store->schema_version().value() == Store::kSchemaVersion);
        CHECK(!b.store->moments_in_use(std::string(64, 'a')).value());
        b.store.reset();
        {  // at schema 16: the loss-check units' columns not there
            auto db = open_database(b.url, false);
            db->begin();
            db->exec(kDropCheckColumns);
            db->set_schema_version(16);
            db->exec("COMMIT");
        }
        b.store = b.reopen();
        CHECK(b.store->schema_version().value() == Store::kSchemaVersion);
        CHECK(!b.store->work_unit("none").value().has_value());
    });
}

TEST_CASE("settings by prefix; the stall guard's figures: the last merge, refusals since, merges since") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        REQUIRE(store.set_setting("suspended_check/t_1/misaligned", "100"));
        REQUIRE(store.set_setting("suspended_check/tx1/misaligned", "101"));  // '_' is no wildcard
        REQUIRE(store.set_setting("other", "x"));
        auto rows = store.settings_with_prefix("suspended_check/t_1/").value();
        REQUIRE(rows.size() == 1);
        CHECK(rows[0].first == "suspended_check/t_1/misaligned");
        CHECK(store.settings_with_prefix("suspended_check/").value().size() == 2);
        REQUIRE(store.remove_setting("suspended_check/t_1/misaligned"));
        CHECK(store.settings_with_prefix("suspended_check/t_1/").value().empty());

        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        auto bob = make_client(store, "key-b");
        auto none = store.stall_figures("t", "misaligned").value();
        CHECK(!none.last_merge_at.has_value());
        CHECK(none.refusals == 0);
        CHECK(!none.first_return_at.has_value());

        auto merged = issue(store, "w1", alice.id, 1000, 9000);
        REQUIRE(store.record_return(merged.id, "d1", 8, "{}", 1100).value());
        REQUIRE(store.accept(merged, {1.0, std::nullopt, 0.5, std::nullopt}, 1.0, true, 1100).value());
        // Without steps at the full rate (results before schema 10), its plain steps.
        CHECK(store.recent_norms_per_step("t", 10).value().at(0) == doctest::Approx(1.0 / 50));
        std::int64_t at = 1200;
        for (const auto* client : {&alice, &bob, &bob}) {
            auto a = issue(store, "w" + std::to_string(at), client->id, at, 9000);
            REQUIRE(store.record_return(a.id, "d", 8, "{}", at).value());
            REQUIRE(store.reject(a.id, "misaligned", "x", at, 3).value());
            at += 100;
        }
        auto figures = store.stall_figures("t", "misaligned").value();
        CHECK(figures.last_merge_at == 1100);
        CHECK(figures.refusals == 3);
        CHECK(figures.volunteers == 2);
        CHECK(figures.first_refusal_at == 1200);
        CHECK(figures.first_return_at == 1200);  // the first result after the merge, not the merged one
        CHECK(store.stall_figures("t", "no_improvement").value().refusals == 0);
        CHECK(store.merges_since("t", 1100).value() == 1);
        CHECK(store.merges_since("t", 1101).value() == 0);
        CHECK(store.recent_alignments("t", 10).value() == std::vector<double>{0.5});
    });
}

TEST_CASE("clients: a known key keeps its id, the address limit refuses Sybils, nonces refuse replays") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        auto alice = make_client(store, "key-a", 1000);
        auto again = store.register_client("key-a", "renamed", "1.1", "10.9.9.9", 1100).value();
        REQUIRE(again.has_value());
        CHECK(again->id == alice.id);
        CHECK(store.client(alice.id).value()->name == "renamed");
        CHECK(store.client(alice.id).value()->address == "10.0.0.1");  // the first address is kept

        RegistrationLimit limit{2, 900};
        REQUIRE(store.register_client("key-b", "b", "1", "10.0.0.1", 1200, limit).value().has_value());
        CHECK(!store.register_client("key-c", "c", "1", "10.0.0.1", 1200, limit).value().has_value());
        CHECK(store.registrations_from("10.0.0.1", 900).value() == 2);

        CHECK(store.claim_nonce(alice.id, "n1", 1000, 300).value());
        CHECK(!store.claim_nonce(alice.id, "n1", 1001, 300).value());  // a replay
        CHECK(store.claim_nonce(alice.id, "n2", 1001, 300).value());

        REQUIRE(store.note_client_seen(alice.id, "cuda", 123.5, 1500));
        auto seen = store.client(alice.id).value().value();
        CHECK(seen.device == "cuda");
        CHECK(seen.samples_per_s == doctest::Approx(123.5));
        CHECK(seen.last_seen == 1500);
        REQUIRE(store.set_client_banned(alice.id, true, 1500));
        CHECK(store.client(alice.id).value()->banned);
        CHECK(store.set_client_quarantined(alice.id, true, "test", 1500).value());
        CHECK(!store.set_client_quarantined(alice.id, true, "test", 1500).value());  // already
        auto counts = store.counts(1400).value();
        CHECK(counts.clients == 2);
        CHECK(counts.clients_active == 1);
        CHECK(counts.clients_quarantined == 1);
        CHECK(store.active_clients(1000, 10).value() == 2);
        CHECK(store.active_clients(1000, 1).value() == 1);  // counted up to at_most
        CHECK(!store.set_client_banned("c-absent", true, 1500).ok());
    });
}

TEST_CASE("a failed audit's span: since the volunteer's last clean audit or registration; its credit withdrawn") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a", 1000);
        auto bob = make_client(store, "key-b", 1000);
        CHECK(store.since_clean_audit(alice.id).value() == 1000);  // never audited: since registration
        auto credited = [&](const std::string& unit, const std::string& client, std::int64_t at) {
            auto a = issue(store, unit, client, at, at + 1000);
            REQUIRE(store.record_return(a.id, "delta-" + unit, 64, "{}", at + 10).value());
            REQUIRE(store.accept(a, {1.0, 0.01, 0.4, 4}, 2.0, true, at + 20).value());
            return a.id;
        };
        auto passed = [&](const std::string& id, const std::string& client, std::int64_t at) {
            auto detail = R"({"assignment_id":")" + id + R"(","client_id":")" + client + R"("})";
            REQUIRE(store.add_event("audit_passed", detail, at));
        };
        auto before = credited("w1", alice.id, 1100);
        passed(before, alice.id, 1130);
        passed("x", bob.id, 1500);  // another volunteer's
        CHECK(store.since_clean_audit(alice.id).value() == 1131);
        auto after = credited("w2", alice.id, 1200);
        credited("w3", bob.id, 1200);
        auto withdrawn = store.withdraw_credit_since(alice.id, 1131, "a replay audit failed", 1300).value();
        CHECK(withdrawn.results == std::vector<std::string>{after});
        CHECK(withdrawn.credit == doctest::Approx(2.0));
        CHECK(store.client(alice.id).value()->credit == doctest::Approx(2.0));  // w1's stays
        CHECK(store.client(bob.id).value()->credit == doctest::Approx(2.0));
        CHECK(store.assignment(after).value()->credit == 0);
        CHECK(store.withdraw_credit_since(alice.id, 1131, "again", 1400).value().results.empty());
        auto events = store.events_after(0, 100).value();
        CHECK(std::count_if(events.begin(), events.end(), [](const auto& e) { return e.kind == "credit_withdrawn"; }) ==
              1);
    });
}

TEST_CASE("tasks and versions: the newest unfinished task, version chains, checkpoints, retention, pins") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        make_task(store, "u", 50);  // same second: the later insert is newer
        CHECK(!store.create_task({"t", "{}", TaskState::Active, 60, 0}, {}, version_record("t", 0)).ok());
        CHECK(store.current_task().value()->id == "u");
        REQUIRE(store.set_task_state("u", TaskState::Finished, 70));
        CHECK(store.current_task().value()->id == "t");
        CHECK(!store.set_task_state("absent", TaskState::Paused, 70).ok());
        auto events = store.events_after(0, 100).value();
        CHECK(std::any_of(events.begin(), events.end(), [](const auto& e) { return e.kind == "task_state"; }));
        REQUIRE(store.set_task_weight("t", 2.5));
        CHECK(!store.set_task_weight("absent", 1).ok());
        auto tasks = store.tasks().value();
        REQUIRE(tasks.size() == 2);
        CHECK(tasks[0].id == "t");
        CHECK(tasks[0].weight == 2.5);
        CHECK(tasks[1].weight == 1);  // the default
        auto shards = store.shards("t").value();
        REQUIRE(shards.size() == 2);
        CHECK(shards[0].sha256 == "shard-a");
        CHECK(shards[1].samples == 6);

        for (std::int64_t v = 1; v <= 6; ++v) REQUIRE(store.commit_version(version_record("t", v, v % 3 == 0), {}));
        CHECK(!store.commit_version(version_record("t", 9), {}).ok());  // must follow 6
        CHECK(store.task("t").value()->version == 6);
        auto chain = store.versions_between("t", 2, 5).value();
        REQUIRE(chain.size() == 3);
        CHECK(chain.front().version == 3);
        CHECK(chain.back().patch_sha256.value() == "patch-t-5");
        CHECK(store.last_checkpoint("t", 5).value()->version == 3);
        CHECK(store.versions_of_blob("t", "blob-t-4").value()->first == 4);
        CHECK(store.version_publishing("blob-t-4").value()->second == 4);

        REQUIRE(store.set_validation_result("t", 3, {0.75, 0.5, 100, true}));
        auto three = store.version("t", 3).value().value();
        CHECK(three.validation_loss.value() == doctest::Approx(0.75));
        CHECK(three.validation_accuracy.value() == doctest::Approx(0.5));
        CHECK(three.validation_full);

        CHECK(store.set_pinned("t", 0, true).value());
        CHECK(!store.set_pinned("t", 1, true).value());        // not a checkpoint
        auto retired = store.retire_versions("t", 2).value();  // keeps the checkpoints 3 and 6
        CHECK(retired.before == 3);
        std::set<std::string> files(retired.files.begin(), retired.files.end());
        CHECK(files.count("patch-t-1") == 1);
        CHECK(files.count("blob-t-0") == 0);  // pinned
        CHECK(files.count("blob-t-3") == 0);
        auto referenced = store.referenced_blobs().value();
        CHECK(referenced.count("blob-t-0") == 1);
        CHECK(referenced.count("patch-t-1") == 0);
        CHECK(referenced.count("shard-b") == 1);
    });
}

TEST_CASE("leases: one holder at a time, renewals, takeover after expiry, fenced commits") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        LeaseClaim first{"aggregator:t", "host:1:a"}, second{"aggregator:t", "host:2:b"};
        CHECK(store.claim_lease(first, 100, 115).value());
        CHECK(!store.claim_lease(second, 101, 116).value());  // held until 115
        CHECK(store.claim_lease(first, 110, 125).value());    // renewed
        CHECK(!store.claim_lease(second, 125, 140).value());  // not expired at 125 itself
        CHECK(store.lease("aggregator:t").value()->holder == first.holder);
        REQUIRE(store.commit_version(version_record("t", 1), {}, first));
        CHECK(store.claim_lease(second, 126, 141).value());  // expired: taken over
        CHECK(!store.claim_lease(first, 127, 142).value());  // the old holder cannot take it back
        // The deposed holder's commit is refused; the new holder's goes through.
        auto deposed = store.commit_version(version_record("t", 2), {}, first);
        REQUIRE(!deposed.ok());
        CHECK(deposed.message().find("no longer this process's") != std::string::npos);
        CHECK(store.task("t").value()->version == 1);
        REQUIRE(store.commit_version(version_record("t", 2), {}, second));
        // Releasing someone else's lease does nothing; releasing one's own frees it at once.
        REQUIRE(store.release_lease(first));
        CHECK(store.lease("aggregator:t").value()->holder == second.holder);
        REQUIRE(store.release_lease(second));
        CHECK(!store.lease("aggregator:t").value().has_value());
        CHECK(store.claim_lease(first, 128, 143).value());
        CHECK(store.claim_lease({"aggregator:u", "host:2:b"}, 128, 143).value());  // another name
    });
}

TEST_CASE("the work-unit lifecycle: issue, return, accept, merge; reject, time out, abandon; the history") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        auto bob = make_client(store, "key-b");

        auto first = issue(store, "w1", alice.id, 1000, 2000);
        CHECK(store.in_flight(alice.id).value() == 1);
        CHECK(store.tasks_in_progress(alice.id).value() == std::vector<std::string>{"t"});
        CHECK(store.tasks_in_progress(bob.id).value().empty());
        CHECK(store.results_in_flight("t").value() == 1);  // issued
        CHECK(store.record_return(first.id, "delta-1", 64, R"({"samples":3200,"loss_end":0.5})", 1100).value());
        CHECK(!store.record_return(first.id, "delta-1", 64, "{}", 1100).value());  // not in progress any more
        CHECK(store.tasks_in_progress(alice.id).value().empty());
        CHECK(store.pending_delta_ids().value().count(first.id) == 1);
        CHECK(store.accept(first, {2.5, 0.01, 0.42, 12.5}, 3.0, true, 1110).value());
        CHECK(store.work_unit("w1").value()->state == WorkUnitState::Done);
        CHECK(store.assignment(first.id).value()->alignment == 0.42);
        CHECK(store.recent_alignments("t", 10).value() == std::vector<double>{0.42});
        auto accepted = store.accepted_after("t", 0).value();
        REQUIRE(accepted.size() == 1);
        CHECK(accepted[0].assignment_id == first.id);
        CHECK(store.accepted_after("t", accepted[0].seq).value().empty());  // the cursor is past it
        CHECK(store.accepted_after("another task", 0).value().empty());
        CHECK(store.results_in_flight("t").value() == 1);  // accepted, not merged yet
        REQUIRE(store.commit_version(version_record("t", 1), {first.id}));
        CHECK(store.accepted_after("t", 0).value().empty());  // merged
        CHECK(store.results_in_flight("t").value() == 0);
        auto merged = store.assignment(first.id).value().value();
        CHECK(merged.state == AssignmentState::Merged);
        CHECK(merged.merged_version.value() == 1);
        CHECK(store.merged_between("t", 0, 1).value().size() == 1);
        CHECK(store.client(alice.id).value()->credit == doctest::Approx(3.0));
        CHECK(store.recent_norms_per_step("t", 10).value().at(0) == doctest::Approx(2.5 / 12.5));
        CHECK(merged.full_rate_steps == 12.5);
        CHECK(store.recent_gains_per_step("t", 10).value().at(0) == doctest::Approx(0.01));
        CHECK(store.recent_gains_per_step("t", 10, 0, 12.5).value().size() == 1);  // as long as asked
        CHECK(store.recent_gains_per_step("t", 10, 0, 13).value().empty());        // shorter than asked

        // The run's progress: steps merged; the volunteers issued a unit since, and the fastest.
        REQUIRE(store.note_client_seen(alice.id, "cpu", 40.0, 1150));
        REQUIRE(store.note_client_seen(bob.id, "cuda", 900.0, 1150));  // bob has no unit of the task yet
        auto progress = store.run_progress("t", 900).value();
        CHECK(progress.steps_merged == 50);
        CHECK(progress.volunteers == 1);
        CHECK(progress.fastest_samples_per_s == doctest::Approx(40.0));
        CHECK(store.run_progress("t", 1001).value().fastest_samples_per_s == 0);  // nobody issued one since

        auto second = issue(store, "w2", bob.id, 1200, 1300);
        CHECK(store.record_return(second.id, "delta-2", 64, R"({"samples":100})", 1250).value());
        CHECK(store.reject(second.id, "norm_too_large", "x10", 1260, 3).value());
        CHECK(store.rejection_of(second.id).value()->reason == "norm_too_large");
        CHECK(store.rejection_counts().value().at("norm_too_large") == 1);
        CHECK(store.rejections_since(bob.id, 1200).value() == 1);
        CHECK(store.client(bob.id).value()->rejected == 1);

        auto third = issue(store, "w3", bob.id, 1300, 1400);
        make_task(store, "u", 60);
        CHECK(store.expire_overdue("u", 1500, 1).value().empty());  // another task's units are not its
        auto ended = store.expire_overdue("t", 1500, 1).value();
        REQUIRE(ended.size() == 1);
        CHECK(ended[0].assignment_id == third.id);
        CHECK(ended[0].work_unit_retired);
        auto fourth = issue(store, "w4", bob.id, 1500, 9000, 2);
        // w2 again after its rejection, and w4's second replica; neither to Bob, who held both.
        CHECK(store.reissuable_work_units("t", alice.id).value().size() == 2);
        CHECK(store.reissuable_work_units("t", bob.id).value().empty());
        CHECK(store.abandon(fourth.id, 1600, 3).value().has_value());
        CHECK(!store.abandon(fourth.id, 1600, 3).value().has_value());

        // A replicated unit: one replica validated, its twin not back yet, then issued.
        auto fifth = issue(store, "w5", alice.id, 2000, 9000, 2);
        REQUIRE(store.record_return(fifth.id, "delta-5", 64, "{}", 2010).value());
        CHECK(store.mark_validated(fifth.id, {1.0, std::nullopt, std::nullopt, 7.0}, 2020).value());
        CHECK(store.assignment(fifth.id).value()->full_rate_steps == 7.0);
        // A volunteer's first result of the task, or a later one (the consensus's warm-up rule).
        auto returned_before = [&](const AssignmentRecord& a) {
            return store.returned_before(store.assignment(a.id).value().value()).value();
        };
        CHECK(!returned_before(first));
        CHECK(!returned_before(second));  // Bob's first, though it came back after Alice's
        CHECK(returned_before(fifth));
        CHECK(store.in_state(AssignmentState::Validated).value().size() == 1);
        // Claimed to be accepted alone by one process at a time, until its claim lapses.
        CHECK(store.claim_lonely_validated("t", 2100, 60, {"P1", 2160}).value().size() == 1);
        CHECK(store.claim_lonely_validated("t", 2100, 60, {"P2", 2160}).value().empty());      // P1 holds it
        CHECK(store.claim_lonely_validated("t", 2110, 60, {"P1", 2170}).value().size() == 1);  // P1 again
        CHECK(store.claim_lonely_validated("t", 2170, 60, {"P2", 2230}).value().size() == 1);  // P1's lapsed
        AssignmentRecord twin = fifth;
        twin.id = "w5-b";
        twin.client_id = bob.id;
        twin.issued_at = 2030;
        REQUIRE(store.add_assignment(twin, std::nullopt).value() == Store::Claim::Made);
        CHECK(store.claim_lonely_validated("t", 2300, 60, {"P1", 2360}).value().empty());  // its twin is in progress
        CHECK(store.live_assignments("w5").value() == 2);
        auto replicas = store.assignments_of("w5").value();
        REQUIRE(replicas.size() == 2);
        CHECK(replicas[0].id == fifth.id);  // in the order issued
        // An unreplicated unit with no live assignment moves onto a newer version when reissued.
        AssignmentRecord again = second;
        again.id = "w2-b";
        again.client_id = alice.id;
        REQUIRE(store.add_assignment(again, 1).value() == Store::Claim::Made);
        CHECK(store.work_unit("w2").value()->base_version == 1);
        CHECK(store.add_assignment(again, std::nullopt).value() == Store::Claim::Taken);  // its one slot is held
        // A unit that another request or process gave out since the scheduler found it free is
        // not claimed, rebased or not: w2 has its one live assignment, w5 its two.
        AssignmentRecord late = second;
        late.id = "w2-c";
        late.client_id = bob.id;
        CHECK(store.add_assignment(late, 2).value() == Store::Claim::Taken);
        CHECK(store.work_unit("w2").value()->base_version == 1);  // not moved under its holder
        CHECK(!store.assignment("w2-c").value().has_value());
        AssignmentRecord extra = fifth;
        extra.id = "w5-c";
        CHECK(store.add_assignment(extra, std::nullopt).value() == Store::Claim::Taken);
        CHECK(store.live_assignments("w5").value() == 2);
        // A volunteer at its limit of units in progress claims nothing, new or reissued.
        auto bobs = store.in_flight(bob.id).value();
        REQUIRE(bobs >= 1);
        WorkUnitRecord spare = store.work_unit("w5").value().value();
        spare.id = "w9";
        spare.shards.clear();  // the shards' use counts below stay those of the units above
        AssignmentRecord ninth = extra;
        ninth.id = "w9-a";
        ninth.work_unit_id = "w9";
        ninth.client_id = bob.id;
        CHECK(store.create_work_unit(spare, ninth, bobs).value() == Store::Claim::Busy);
        CHECK(!store.work_unit("w9").value().has_value());
        CHECK(store.create_work_unit(spare, ninth, bobs + 1).value() == Store::Claim::Made);
        CHECK(store.in_flight(bob.id).value() == bobs + 1);
        CHECK(store.clients().value().front().id == alice.id);  // by credit
        CHECK(store.shards("t").value().at(0).uses == 5);       // every unit above used shard-a

        auto counts = store.counts(0).value();
        CHECK(counts.assignments.at("merged") == 1);
        CHECK(counts.assignments.at("rejected") == 1);
        CHECK(counts.assignments.at("timed_out") == 1);
        CHECK(counts.assignments.at("abandoned") == 1);
        CHECK(counts.rejections == 1);
        auto history = store.history("t", 0, 1000).value();
        REQUIRE(history.size() == 2);  // w5 came back in the second bucket, and is not accepted yet
        CHECK(history[1].start == 2000);
        CHECK(history[1].accepted == 0);
        CHECK(history[0].start == 1000);
        CHECK(history[0].accepted == 1);
        CHECK(history[0].rejected == 1);
        CHECK(history[0].samples == 3200);
        CHECK(history[0].train_loss.value() == doctest::Approx(0.5));
        auto activity = store.activity_since("t", 0).value();
        CHECK(activity.accepted == 1);
        CHECK(activity.samples == 3200);
        CHECK(store.staleness_counts("t").value().at(0) == 1);

        auto events = store.events_after(0, 1000).value();
        REQUIRE(!events.empty());
        CHECK(events.front().kind == "task_created");
        CHECK(store.last_event_id().value() == events.back().id);
        for (std::size_t i = 1; i < events.size(); ++i) CHECK(events[i].id > events[i - 1].id);
    });
}

TEST_CASE("a store whose PostgreSQL server restarts connects again, its prepared statements prepared anew") {
    Backend b(true);
    REQUIRE(b.store->set_setting("k", "before"));
    CHECK(b.store->setting("k").value().value() == "before");  // prepared on the first connection
    cluster().restart();
    // Each pooled connection finds its socket closed at most once, then opens a new one.
    int failures = 0;
    tessera::common::Status written = tessera::common::make_error("not tried");
    for (int attempt = 0; attempt < 16 && !written; ++attempt) {
        written = b.store->set_setting("k", "after");
        if (!written) {
            ++failures;
            CHECK(written.message().find("SQL failed") != std::string::npos);
        }
    }
    REQUIRE_MESSAGE(written.ok(), written.message());
    CHECK(failures <= 8);
    for (int i = 0; i < 16; ++i) CHECK(b.store->setting("k").value().value() == "after");
}

TEST_CASE("a PostgreSQL URL that reaches no server, and an unsupported one, are clear errors") {
    auto store = Store::connect("postgresql://tessera:secret@127.0.0.1:1/none?connect_timeout=2", false);
    REQUIRE(!store.ok());
    CHECK(store.message().find("cannot connect") != std::string::npos);
    CHECK(store.message().find("127.0.0.1:1") != std::string::npos);
    CHECK(store.message().find("secret") == std::string::npos);  // the password stays out of messages
    for (bool create : {false, true}) {
        auto other = Store::connect("mysql://root@127.0.0.1/tessera", create);
        REQUIRE(!other.ok());
        CHECK(other.message().find("'mysql' databases are not supported") != std::string::npos);
    }
    TempDir dir;
    auto missing = Store::connect("sqlite:" + (dir.path() / "absent.db").string(), false);
    REQUIRE(!missing.ok());
    CHECK(missing.message().find("tessera-server init") != std::string::npos);
}
