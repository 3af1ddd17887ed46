// The store's one-read views, on both back ends (store_backends.h): what a work request starts
// from, what a validation decides on, the checks' recent figures, the patch chain from a model
// a volunteer holds; the claims whose guards are part of their insert; the planner statistics
// PostgreSQL is kept up with as a run grows.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "database.h"
#include "store_backends.h"

using namespace tessera::server;
using namespace tessera::testing::store_backends;

namespace {

std::vector<double> sorted(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values;
}

AssignmentRecord assignment_of(const std::string& id, const std::string& unit, const std::string& client,
                               std::int64_t now) {
    AssignmentRecord a;
    a.id = id;
    a.work_unit_id = unit;
    a.client_id = client;
    a.issued_at = now;
    a.deadline = now + 1000;
    a.envelope_json = "{}";
    return a;
}

}  // namespace

TEST_CASE(
    "a work request's view: each task's current and first-publishing version, units to give again, "
    "the volunteer's units in progress, volunteers about") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a", 1000);
        auto bob = make_client(store, "key-b", 1000);
        REQUIRE(store.commit_version(version_record("t", 1, false), {}));
        auto unpublished = version_record("t", 2, false);
        unpublished.blob_sha256 = "blob-t-1";  // version 2 keeps version 1's published model
        REQUIRE(store.commit_version(unpublished, {}));

        auto view = store.work_view(alice.id, 900).value();
        REQUIRE(view.tasks.size() == 1);
        CHECK(view.tasks[0].task.id == "t");
        REQUIRE(view.tasks[0].current.has_value());
        CHECK(view.tasks[0].current->version == 2);
        CHECK(view.tasks[0].current->blob_sha256 == "blob-t-1");
        CHECK(view.tasks[0].published_version == 1);
        CHECK(!view.tasks[0].reissuable);
        CHECK(view.in_flight == 0);
        CHECK(view.active_clients == 2);
        CHECK(store.work_view(alice.id, 2000).value().active_clients == 0);

        issue(store, "w1", bob.id, 1000, 9000, 2);  // a replicated unit: one slot left
        auto for_alice = store.work_view(alice.id, 900).value();
        CHECK(for_alice.tasks[0].reissuable);
        CHECK(for_alice.in_flight == 0);
        auto for_bob = store.work_view(bob.id, 900).value();
        CHECK(!for_bob.tasks[0].reissuable);  // bob holds it already
        CHECK(for_bob.in_flight == 1);
        REQUIRE(store.set_task_state("t", TaskState::Paused, 1100));
        CHECK(!store.work_view(alice.id, 900).value().tasks[0].reissuable);  // only active tasks' units
    });
}

TEST_CASE("claims: a busy volunteer's new unit is not created; a full unit is taken") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        auto bob = make_client(store, "key-b");
        auto carol = make_client(store, "key-c");
        issue(store, "w1", alice.id, 1000, 9000, 2);

        WorkUnitRecord unit{"w2", "t", 0, {"shard-b"}, 10, 3, 1, WorkUnitState::Open, 0, 1000};
        CHECK(store.create_work_unit(unit, assignment_of("w2-a", "w2", alice.id, 1000), 1).value() ==
              Store::Claim::Busy);
        CHECK(!store.work_unit("w2").value().has_value());  // rolled back with the claim
        CHECK(store.shards("t").value()[1].uses == 0);

        CHECK(store.add_assignment(assignment_of("w1-b", "w1", bob.id, 1001), std::nullopt, 1).value() ==
              Store::Claim::Made);
        CHECK(store.add_assignment(assignment_of("w1-c", "w1", carol.id, 1002), std::nullopt).value() ==
              Store::Claim::Taken);  // both replicas given out
        CHECK(store.add_assignment(assignment_of("w1-d", "w1", bob.id, 1003), std::nullopt, 1).value() ==
              Store::Claim::Busy);
        CHECK(store.add_assignment(assignment_of("x-a", "absent", carol.id, 1004), std::nullopt).value() ==
              Store::Claim::Taken);
        CHECK(store.assignments_of("w1").value().size() == 2);
    });
}

TEST_CASE("a validation's context: the result, its task, unit and volunteer, and the task around it") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        auto bob = make_client(store, "key-b");
        auto first = issue(store, "w1", alice.id, 1000, 9000);
        auto second = issue(store, "w2", alice.id, 1010, 9000);
        issue(store, "w3", bob.id, 1020, 9000);
        REQUIRE(store.record_return(first.id, "d1", 8, "{}", 1100).value());
        REQUIRE(store.record_return(second.id, "d2", 8, "{}", 1110).value());
        const std::string prefix = "suspended_check/";
        REQUIRE(store.set_setting(prefix + "tx/misaligned", "1"));  // another task's

        auto context = store.result_context(second.id, 1005, prefix).value().value();
        CHECK(context.assignment.id == second.id);
        CHECK(context.assignment.state == AssignmentState::Returned);
        CHECK(context.task.id == "t");
        CHECK(context.unit.id == "w2");
        CHECK(context.unit.local_steps == 50);
        REQUIRE(context.client.has_value());
        CHECK(context.client->id == alice.id);
        CHECK(context.task_volunteers == 2);  // alice (w2) and bob (w3) issued since 1005
        CHECK(context.settings_of_task == 0);
        CHECK(context.returned_before);  // w1 came back first
        CHECK(!store.result_context(first.id, 1005, prefix).value()->returned_before);

        REQUIRE(store.set_setting(prefix + "t/misaligned", "1100"));
        CHECK(store.result_context(second.id, 1015, prefix).value()->settings_of_task == 1);
        CHECK(store.result_context(second.id, 1015, prefix).value()->task_volunteers == 1);
        CHECK(!store.result_context("absent", 0, prefix).value().has_value());
    });
}

TEST_CASE("the checks' recent figures in one read are the two reads' figures, and norms come by pool") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        for (int i = 0; i < 3; ++i) {
            auto a = issue(store, "w" + std::to_string(i), alice.id, 1000 + i, 9000, i == 2 ? 2 : 1);
            REQUIRE(store.record_return(a.id, "d", 8, "{}", 1100 + i).value());
            REQUIRE(store.accept(a, {1.0 + i, 0.01, 0.3 + 0.1 * i, 10.0}, 1.0, true, 1200 + i).value());
        }
        auto figures = store.recent_figures("t", 2).value();
        CHECK(figures.norms_per_step.size() == 2);
        CHECK(sorted(figures.norms_per_step) == sorted(store.recent_norms_per_step("t", 2).value()));
        CHECK(sorted(figures.alignments) == sorted(store.recent_alignments("t", 2).value()));
        CHECK(sorted(figures.alignments).back() == doctest::Approx(0.5));
        CHECK(store.recent_figures("u", 2).value().alignments.empty());

        // The norms of one pool: the replicated unit's alone, or the unreplicated units' (the
        // alignments of all).
        auto replicated = store.recent_figures("t", 2, NormPool::Replicated).value();
        REQUIRE(replicated.norms_per_step.size() == 1);
        CHECK(replicated.norms_per_step[0] == doctest::Approx(0.3));
        CHECK(replicated.alignments.size() == 2);
        auto single = sorted(store.recent_norms_per_step("t", 5, NormPool::Single).value());
        REQUIRE(single.size() == 2);
        CHECK(single[0] == doctest::Approx(0.1));
        CHECK(single[1] == doctest::Approx(0.2));
    });
}

TEST_CASE("the patch chain from a held model: the versions after the last that published it") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        for (std::int64_t v = 1; v <= 5; ++v) REQUIRE(store.commit_version(version_record("t", v, false), {}));
        auto versions = [&](const std::string& held, std::int64_t through) {
            std::vector<std::int64_t> found;
            for (const auto& v : store.versions_after_blob("t", held, through).value()) found.push_back(v.version);
            return found;
        };
        CHECK(versions("blob-t-2", 5) == std::vector<std::int64_t>{3, 4, 5});
        CHECK(versions("blob-t-2", 4) == std::vector<std::int64_t>{3, 4});
        CHECK(versions("blob-t-5", 5).empty());  // holds the newest
        CHECK(versions("blob-t-5", 3).empty());  // holds one past the base
        CHECK(versions("unknown", 5).empty());
    });
}

TEST_CASE("PostgreSQL's planner statistics are refreshed on a doubling schedule; SQLite's are left alone") {
    SUBCASE("sqlite") {
        Backend backend(false);
        CHECK_FALSE(
            backend.store->refresh_statistics(std::chrono::steady_clock::now() + std::chrono::hours(1)).value());
    }
    SUBCASE("postgresql") {
        Backend backend(true);
        auto start = std::chrono::steady_clock::now();  // the store opened just before
        auto connection = open_database(backend.url, false);
        auto reltuples = [&] {
            Statement query(*connection, "SELECT reltuples FROM pg_class WHERE relname = 'assignments'");
            REQUIRE(query.step());
            return query.real(0);
        };
        CHECK(reltuples() < 0);                                         // never analyzed
        CHECK_FALSE(backend.store->refresh_statistics(start).value());  // 5 s after opening
        using std::chrono::seconds;
        CHECK(backend.store->refresh_statistics(start + seconds(6)).value());
        CHECK(reltuples() == 0);                                                      // analyzed: empty
        CHECK_FALSE(backend.store->refresh_statistics(start + seconds(15)).value());  // next at 6 + 10 s
        CHECK(backend.store->refresh_statistics(start + seconds(16)).value());
        CHECK_FALSE(backend.store->refresh_statistics(start + seconds(35)).value());  // then 16 + 20 s
        CHECK(backend.store->refresh_statistics(start + seconds(36)).value());
    }
}
