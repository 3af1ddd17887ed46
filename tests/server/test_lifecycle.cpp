// The work-unit lifecycle with a manual clock: deadlines and reissue, retirement, in-flight
// limits, epoch coverage and locality, H scaled to speed, lonely replicas; several tasks and a
// volunteer's choice among them (test_restarts.cpp: what a restart resumes).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "aggregator_election.h"
#include "checkpoint.h"
#include "file_io.h"
#include "model_patch.h"
#include "polling.h"
#include "server_fixture.h"
#include "sha256.h"
#include "sqlite_database.h"
#include "trust.h"
#include "unit_sizing.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

std::optional<common::WorkUnit> request_with(TestVolunteer& volunteer, double samples_per_s,
                                             std::vector<std::string> cached = {}) {
    common::WorkRequest request;
    request.client_id = volunteer.id();
    request.device = {"cpu", "test cpu", 1 << 30, 2};
    request.samples_per_s = samples_per_s;
    request.cached_shards = std::move(cached);
    auto reply = volunteer.post("/api/v1/work", boost::json::serialize(common::to_json(request)));
    auto response = common::parse_message<common::WorkResponse>(reply.body).value();
    if (!response.has_work) return std::nullopt;
    return common::parse_message<common::WorkUnit>(response.work_unit.payload).value();
}

}  // namespace

TEST_CASE("an overdue unit times out, is reissued on the current model, and retires after N failures") {
    TestServer server([](TaskConfig& c) { c.max_failures = 2; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    auto first = alice.request_work().value();
    CHECK(first.encoding.carry_residual);  // not replicated
    // Bob's good result moves the model to version 1 meanwhile.
    auto other = bob.request_work().value();
    REQUIRE(bob.upload(other, bob.made_up_delta(other, 1e-3f)).status == 200);
    server.app().wait_idle();
    REQUIRE(server.version() == 1);

    server.advance(server.config().deadline_s + 1);
    auto report = server.app().transitioner().tick().value();
    CHECK(report.timed_out == 1);
    CHECK(state_of(server, first.wu_id) == "timed_out");
    CHECK(server.store().client(alice.id()).value()->valid_streak == 0);

    auto reissued = carol.request_work().value();
    CHECK(reissued.shards[0].sha256 == first.shards[0].sha256);
    CHECK(reissued.base_version == 1);  // rebased: nobody else holds it
    CHECK(reissued.wu_id != first.wu_id);

    server.advance(server.config().deadline_s + 1);
    report = server.app().transitioner().tick().value();
    CHECK(report.timed_out == 1);
    CHECK(report.retired == 1);
    auto unit = server.store().assignment(reissued.wu_id).value()->work_unit_id;
    CHECK(server.store().work_unit(unit).value()->state == WorkUnitState::Retired);
    // Alice never gets that unit back; new work comes from fresh units.
    auto next = alice.request_work().value();
    CHECK(server.store().assignment(next.wu_id).value()->work_unit_id != unit);
}

TEST_CASE("one task the transitioner cannot read does not stop the other tasks' deadlines") {
    TestServer server;
    TestVolunteer alice(server, "alice");
    auto unit = alice.request_work().value();
    // A task whose stored settings no longer parse (written by hand, or by a newer version).
    VersionRecord version;
    version.task_id = "broken";
    version.blob_sha256 = "b";
    version.blob_bytes = 1;
    version.checkpoint = true;
    version.created_at = server.now();
    REQUIRE(server.store().create_task({"broken", "{not json", TaskState::Active, server.now(), 0},
                                       {{"shard-x", 10, 5, 0}}, version));

    server.advance(server.config().deadline_s + 1);
    auto report = server.app().transitioner().tick();
    REQUIRE(report.ok());
    CHECK(report->timed_out == 1);
    CHECK(state_of(server, unit.wu_id) == "timed_out");
    REQUIRE(report->task_errors.size() == 1);
    CHECK(report->task_errors[0].find("task broken: ") == 0);
}

TEST_CASE("each epoch covers every shard before any repeats, preferring shards a volunteer holds") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 10; });
    TestVolunteer volunteer(server);
    auto shards = server.store().shards(server.config().task_id).value();
    REQUIRE(shards.size() == 2);
    // Holding shard 1: the first unit uses it although shard 0 comes first.
    auto first = request_with(volunteer, 0, {shards[1].sha256}).value();
    CHECK(first.shards[0].sha256 == shards[1].sha256);
    auto second = request_with(volunteer, 0, {shards[1].sha256}).value();
    CHECK(second.shards[0].sha256 == shards[0].sha256);  // epoch 1 still needs shard 0
    auto third = request_with(volunteer, 0).value();
    auto fourth = request_with(volunteer, 0).value();
    CHECK(third.shards[0].sha256 != fourth.shards[0].sha256);  // epoch 2 covers both again
    for (const auto& s : server.store().shards(server.config().task_id).value()) CHECK(s.uses == 2);
}

TEST_CASE("among the least-used shards, one no other volunteer holds goes to a volunteer that holds none") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 1; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    auto shards = server.store().shards(server.config().task_id).value();
    REQUIRE(shards.size() == 2);
    // Epoch 1: Bob trains shard 0, Carol shard 1.
    CHECK(request_with(bob, 0).value().shards[0].sha256 == shards[0].sha256);
    CHECK(request_with(carol, 0).value().shards[0].sha256 == shards[1].sha256);
    // Bob, busy, says he holds shard 0 (no work for him: his in-flight limit is 1).
    CHECK(!request_with(bob, 0, {shards[0].sha256}).has_value());
    // Epoch 2 for Alice, who holds nothing: shard 1, which no one else says it holds, although
    // shard 0 comes first.
    CHECK(request_with(alice, 0).value().shards[0].sha256 == shards[1].sha256);
}

TEST_CASE(
    "with a publishing cadence, units are based on the last published model and patches chain the "
    "publications") {
    TestServer server([](TaskConfig& c) {
        c.publish_every = 3;
        c.max_in_flight = 100;
    });
    TestVolunteer alice(server, "alice");
    auto task_id = server.config().task_id;
    std::uint32_t seed = 1;
    auto merge_one = [&] {
        auto wu = alice.request_work().value();
        REQUIRE(alice.upload(wu, alice.made_up_delta(wu, 1e-3f, seed++)).status == 200);
        server.app().wait_idle();
        return wu.base_version;
    };
    CHECK(merge_one() == 0);
    CHECK(merge_one() == 0);  // versions 1 and 2 are not published: units stay on version 0
    CHECK(merge_one() == 0);
    CHECK(server.version() == 3);
    auto versions = server.store().versions(task_id).value();
    REQUIRE(versions.size() == 4);
    CHECK(versions[1].blob_sha256 == versions[0].blob_sha256);
    CHECK(versions[2].blob_sha256 == versions[0].blob_sha256);
    CHECK(!versions[1].patch_sha256.has_value());
    CHECK(!versions[1].state_sha256.has_value());  // between checkpoints: the true model is not written
    REQUIRE(versions[3].patch_sha256.has_value());
    CHECK(versions[3].blob_sha256 != versions[0].blob_sha256);
    CHECK(merge_one() == 3);
    merge_one();
    merge_one();
    versions = server.store().versions(task_id).value();
    REQUIRE(versions.size() == 7);
    REQUIRE(versions[6].patch_sha256.has_value());

    // Holding version 0: two patches; holding version 3 (or 4, the same model): one; holding
    // a model the server does not know, or the current one: none.
    auto wu = alice.request_work(versions[0].blob_sha256).value();
    CHECK(wu.base_version == 6);
    CHECK(wu.patch_from == versions[0].blob_sha256);
    REQUIRE(wu.patches.size() == 2);
    CHECK(wu.patches[0].sha256 == *versions[3].patch_sha256);
    CHECK(wu.patches[1].sha256 == *versions[6].patch_sha256);
    CHECK(alice.request_work(versions[4].blob_sha256).value().patches.size() == 1);
    CHECK(alice.request_work(std::string(64, '0')).value().patches.empty());
    CHECK(alice.request_work(versions[6].blob_sha256).value().patches.empty());

    // The patches rebuild the unit's model byte for byte.
    auto blob = [&](const std::string& sha256) { return http_get(server.port(), "/blobs/" + sha256).body; };
    auto model = common::read_checkpoint(common::as_bytes(blob(versions[0].blob_sha256))).value();
    for (const auto& patch : wu.patches) REQUIRE(common::apply_patch(model, common::as_bytes(blob(patch.sha256))).ok());
    auto rebuilt = common::write_checkpoint(model, {task_id, wu.model, wu.base_version}).value();
    CHECK(common::sha256_hex(rebuilt) == wu.model_blob.sha256);
}

TEST_CASE("local steps follow the volunteer's speed within bounds") {
    TaskConfig config;
    config.local_steps = 50;
    config.batch_size = 64;
    config.target_seconds = 120;
    const FleetNow fleet;
    CHECK(unit_local_steps(config, fleet, 0) == 12);   // not measured: a warm-up unit
    CHECK(unit_local_steps(config, fleet, 16) == 30);  // 0.25 steps/s for 120 s
    CHECK(unit_local_steps(config, fleet, 6.4) == 12);
    CHECK(unit_local_steps(config, fleet, 1) == 6);    // floor: H/8
    CHECK(unit_local_steps(config, fleet, 64) == 50);  // ceiling: H
    CHECK(unit_local_steps(config, fleet, 1e6) == 50);
    config.target_seconds = 0;
    CHECK(unit_local_steps(config, fleet, 64) == 50);
    config.replication = 0.1;
    config.trust_streak = 5;
    ClientRecord client;
    CHECK(replication_chance(config, client) == doctest::Approx(0.1));
    CHECK(loss_check_chance(config, client) == 1.0);  // new: every result checked
    client.valid_streak = 5;
    CHECK(replication_chance(config, client) == doctest::Approx(0.02));
    CHECK(loss_check_chance(config, client) == doctest::Approx(config.loss_check));
    client.quarantined = true;
    CHECK(replication_chance(config, client) == 1.0);
    CHECK(loss_check_chance(config, client) == 1.0);
    CHECK(in_flight_limit(config, client) == 1);

    TestServer server([](TaskConfig& c) {
        c.target_seconds = 60;
        c.local_steps = 100;
        c.max_in_flight = 5;
    });
    TestVolunteer fast(server, "fast");
    TestVolunteer slow(server, "slow");
    CHECK(request_with(fast, 40.0)->hyper.local_steps == 100);  // 60 s · 40/s / batch 8 = 300, capped at H
    CHECK(request_with(slow, 8.0)->hyper.local_steps == 60);
}

TEST_CASE("units that end together: a slower volunteer's unit is its share of the fastest one's") {
    TestServer server([](TaskConfig& c) {
        c.target_seconds = 60;
        c.local_steps = 100;
        c.max_in_flight = 5;
        c.units_end_together = true;
    });
    TestVolunteer fast(server, "fast");
    TestVolunteer slow(server, "slow");
    CHECK(request_with(fast, 40.0)->hyper.local_steps == 100);
    // The scheduler reads the fleet at most every few seconds: past that, it knows the fast one.
    server.advance(10);
    CHECK(request_with(slow, 8.0)->hyper.local_steps == 20);  // 100 × 8/40, where 60 s alone gives 60
    CHECK(request_with(fast, 40.0)->hyper.local_steps == 100);
}

TEST_CASE("a volunteer's task choice: only the tasks it names, by id or model, never those it excludes") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 100; });
    TestVolunteer volunteer(server);
    auto first = server.store().current_task().value().value().id;
    auto second = server.config();
    second.task_id = "second";
    second.model = "dit-s";
    REQUIRE(create_task(server.state(), server.store(), second).ok());
    REQUIRE(server.app().refresh_tasks().ok());

    // Equal weights: without a choice both tasks are drawn; with one, only what it allows.
    std::set<std::string> drawn;
    for (int i = 0; i < 12; ++i) drawn.insert(volunteer.request_work().value().task_id);
    CHECK(drawn == std::set<std::string>{first, "second"});
    for (int i = 0; i < 6; ++i) {
        CHECK(volunteer.request_work("", {"second"}).value().task_id == "second");
        CHECK(volunteer.request_work("", {"dit-s"}).value().task_id == "second");  // by model
        CHECK(volunteer.request_work("", {}, {"second"}).value().task_id == first);
        CHECK(volunteer.request_work("", {}, {"dit-tiny"}).value().task_id == "second");  // by model
        CHECK(volunteer.request_work("", {first, "second"}, {first}).value().task_id == "second");
    }
    // A choice no running task meets: no work, and the answer says when to ask again.
    CHECK_FALSE(volunteer.request_work("", {"cnn"}).has_value());
    CHECK_FALSE(volunteer.request_work("", {}, {"dit-tiny", "dit-s"}).has_value());
}

TEST_CASE("two tasks in one server: a task created while it runs, weights, each task's deadline, each its own merges") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 100; });
    TestVolunteer volunteer(server);
    auto first = server.store().current_task().value().value().id;
    auto second_config = server.config();
    second_config.task_id = "second";
    second_config.deadline_s = 100;  // the first's is 1800
    REQUIRE(create_task(server.state(), server.store(), second_config).ok());
    REQUIRE(server.app().refresh_tasks().ok());  // the watcher would within a second
    CHECK(server.app().leading("second"));

    // Weight 0 for the first: every unit is the second's, and merges into the second alone.
    REQUIRE(server.store().set_task_weight(first, 0).ok());
    auto unit = volunteer.request_work().value();
    CHECK(unit.task_id == "second");
    REQUIRE(volunteer.upload(unit, volunteer.made_up_delta(unit, 1e-3f)).status == 200);
    server.app().wait_idle();
    CHECK(server.store().task("second").value()->version == 1);
    CHECK(server.store().task(first).value()->version == 0);

    // One unit of each; past the second's deadline only the second's times out.
    auto of_second = volunteer.request_work().value();
    REQUIRE(server.store().set_task_weight(first, 1).ok());
    REQUIRE(server.store().set_task_weight("second", 0).ok());
    auto of_first = volunteer.request_work().value();
    CHECK(of_first.task_id == first);
    server.advance(second_config.deadline_s + 1);
    auto report = server.app().transitioner().tick().value();
    CHECK(report.timed_out == 1);
    CHECK(state_of(server, of_second.wu_id) == "timed_out");
    CHECK(state_of(server, of_first.wu_id) == "in_progress");

    // Finished and settled: the second is no longer served here (its lease is let go).
    REQUIRE(server.store().set_task_state("second", TaskState::Finished, server.now()).ok());
    REQUIRE(server.app().refresh_tasks().ok());
    CHECK(!server.app().leading("second"));
    CHECK(!server.store().lease("aggregator:second").value().has_value());
    CHECK(server.app().leading(first));
}

TEST_CASE("a process that took the lease but runs no aggregator gives the lease up when it stops") {
    // The renewal thread takes a lease its holder let go before the managing thread starts an
    // aggregator (here it never can: the task is absent); stopping then must not leave the
    // lease to run out, or a finished task's lease outlives every process serving it.
    TestServer server;
    Store& store = server.store();
    BlobStore blobs(server.state().root() / "election-blobs");
    PublishedModels published(store, store, blobs);
    ResultFiles results(server.state());
    auto clock = [&server] { return server.now(); };
    auto make = [&](const LeaseClaim& fence) {
        AggregatorHooks hooks;
        hooks.fence = fence;
        return std::make_unique<Aggregator>(
            store, blobs, published, results, nullptr, [](std::function<void()> job) { job(); }, clock, hooks);
    };
    const LeaseClaim other{"aggregator:absent", "other process"};
    REQUIRE(store.claim_lease(other, server.now(), server.now() + 1000).value());
    Doorbell accepted;
    AggregatorElection election(store, store, store, accepted, clock, make,
                                {"this process", 15, std::chrono::milliseconds(20)});
    REQUIRE(election.start("absent").ok());  // follows
    REQUIRE(store.release_lease(other).ok());
    REQUIRE(wait_for([&] { return store.lease(other.name).value().value_or(LeaseRecord{}).holder == "this process"; },
                     std::chrono::seconds(10)));
    CHECK(!election.leading());
    election.stop();
    CHECK(!store.lease(other.name).value().has_value());
}

TEST_CASE("the in-flight limit holds back work until a unit is returned") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 2; });
    TestVolunteer volunteer(server);
    auto a = volunteer.request_work().value();
    auto b = volunteer.request_work().value();
    CHECK(!volunteer.request_work().has_value());
    REQUIRE(volunteer.upload(a, volunteer.made_up_delta(a, 1e-3f)).status == 200);
    CHECK(volunteer.request_work().has_value());
    (void)b;
}

TEST_CASE(
    "a task's run-wide schedule: each unit carries where the run stands and the span to where it should be, a "
    "replica's twin carries its first copy's, and both train afresh and hold their residuals") {
    TestServer server([](TaskConfig& c) {
        c.replication = 1.0;
        c.target_seconds = 0;  // every unit H steps
        c.inner_optimizer = common::InnerOptimizer::Kept;
        c.lr_schedule = common::LrSchedule{common::LrSchedule::Kind::Cosine, 1000, 100000, 0.1};
    });
    const auto hb = server.config().local_steps * server.config().batch_size;
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto wu_a = alice.request_work().value();
    REQUIRE(wu_a.hyper.schedule.has_value());
    CHECK(*wu_a.hyper.schedule == *server.config().lr_schedule);
    CHECK(wu_a.hyper.schedule_from == 0);
    CHECK(wu_a.hyper.schedule_to == hb);                           // one volunteer issued units so far
    CHECK(wu_a.hyper.optimizer == common::InnerOptimizer::Fresh);  // a replicated unit
    CHECK_FALSE(wu_a.encoding.carry_residual);
    server.advance(10);                                            // past the cached figures
    auto wu_b = bob.request_work().value();
    CHECK(server.store().assignment(wu_b.wu_id).value()->work_unit_id ==
          server.store().assignment(wu_a.wu_id).value()->work_unit_id);
    CHECK(wu_b.hyper.schedule_from == wu_a.hyper.schedule_from);  // not the two volunteers' span now
    CHECK(wu_b.hyper.schedule_to == wu_a.hyper.schedule_to);
    CHECK_FALSE(wu_b.encoding.carry_residual);
    // Sized for a unit in the run's warm-up: its norm is judged per step at the full rate.
    auto rate_share = common::full_rate_steps(unit_rate_of(wu_a.hyper)) / static_cast<double>(wu_a.hyper.local_steps);
    auto delta = alice.made_up_delta(wu_a, static_cast<float>(1e-3 * rate_share));
    REQUIRE(alice.upload(wu_a, delta).status == 200);
    REQUIRE(bob.upload(wu_b, delta).status == 200);
    server.app().wait_idle();
    REQUIRE_MESSAGE(server.version() == 1, rejection_of(server, wu_a.wu_id));

    // One result merged (its confirming twin not counted); two volunteers work on the task.
    server.advance(10);
    auto next = alice.request_work().value();
    CHECK(next.hyper.schedule_from == hb);
    CHECK(next.hyper.schedule_to == hb + 2 * hb);
}

TEST_CASE(
    "a task's optimizer, schedule and per-concurrency settings survive its stored JSON; older tasks have none; bad "
    "ones are named") {
    TestServer server;
    auto config = server.config();
    config.inner_optimizer = common::InnerOptimizer::Kept;
    config.lr_schedule = common::LrSchedule{common::LrSchedule::Kind::Cosine, 500, 90000, 0.05};
    config.merge.concurrency_exponent = 0.75;
    auto back = task_config_from_json(to_json(config)).value();
    CHECK(back.inner_optimizer == common::InnerOptimizer::Kept);
    CHECK(back.merge.concurrency_exponent == 0.75);
    REQUIRE(back.lr_schedule.has_value());
    CHECK(*back.lr_schedule == *config.lr_schedule);

    auto older = to_json(config);
    older.as_object().erase("inner_optimizer");
    older.as_object().erase("lr_schedule");
    older.as_object().erase("concurrency_exponent");
    auto old_task = task_config_from_json(older).value();
    CHECK(old_task.inner_optimizer == common::InnerOptimizer::Fresh);
    CHECK(old_task.merge.concurrency_exponent == 0);
    // A task of 2026-11-26/27 stored per_concurrency: a division by C.
    older.as_object()["per_concurrency"] = true;
    CHECK(task_config_from_json(older).value().merge.concurrency_exponent == 1);
    older.as_object().erase("per_concurrency");
    CHECK_FALSE(old_task.lr_schedule.has_value());
    older.as_object()["lr_schedule"] = nullptr;
    CHECK_FALSE(task_config_from_json(older).value().lr_schedule.has_value());

    auto bad = to_json(config);
    bad.as_object()["lr_schedule"].as_object()["total_samples"] = 100;
    auto refused = task_config_from_json(bad);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.message().find("task.lr_schedule: a cosine schedule's total_samples must exceed warmup_samples") ==
          0);
    config.lr_schedule->final_lr_ratio = 2;
    CHECK(validate_task_config(config).message().find("lr schedule: final_lr_ratio must be in [0, 1]") == 0);
}

TEST_CASE(
    "an accepted result carries the task's concurrency: the volunteers issued its units in the last ten minutes") {
    TestServer server([](TaskConfig& c) { c.replication = 0; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    auto wu_a = alice.request_work().value();
    auto wu_b = bob.request_work().value();
    REQUIRE(alice.upload(wu_a, alice.made_up_delta(wu_a, 1e-3f)).status == 200);
    server.app().wait_idle();
    auto merged = server.store().assignment(wu_a.wu_id).value();
    CHECK(merged->state == AssignmentState::Merged);
    CHECK(merged->concurrency == 2);  // alice and bob; carol asked for nothing

    server.advance(kVolunteerActiveWindowS + 1);
    auto wu_c = carol.request_work().value();
    REQUIRE(carol.upload(wu_c, carol.made_up_delta(wu_c, 1e-3f, 9)).status == 200);
    server.app().wait_idle();
    CHECK(server.store().assignment(wu_c.wu_id).value()->concurrency == 1);             // the others' units are old
    CHECK(server.store().assignment(wu_b.wu_id).value()->concurrency == std::nullopt);  // not accepted
}

TEST_CASE(
    "with conc:M,A,R a result older than R x the concurrency is refused as too stale, not held against its volunteer") {
    TestServer server([](TaskConfig& c) {
        c.replication = 0;
        c.merge.staleness = parse_staleness("conc:1,1,1").value();  // refused beyond 1 × C versions
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto old = alice.request_work().value();  // base version 0; two volunteers active: C = 2
    for (std::uint32_t seed = 30; seed < 33; ++seed) {
        auto wu = bob.request_work().value();
        REQUIRE(bob.upload(wu, bob.made_up_delta(wu, 1e-3f, seed)).status == 200);
        server.app().wait_idle();
    }
    REQUIRE(server.version() == 3);
    REQUIRE(alice.upload(old, alice.made_up_delta(old, 1e-3f, 40)).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, old.wu_id) == "too_stale");
    auto detail = server.store().rejection_of(old.wu_id).value()->detail;
    CHECK(detail.find("τ = 3 versions, beyond the 2 the task merges with 2 volunteer(s) active") == 0);
    CHECK(server.store().rejections_since(alice.id(), 0).value() == 0);  // not a judgement of her work
    CHECK(server.version() == 3);

    // Within R × C it merges.
    auto fresh = alice.request_work().value();
    REQUIRE(alice.upload(fresh, alice.made_up_delta(fresh, 1e-3f, 41)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, fresh.wu_id) == "merged");
}

TEST_CASE("a replica whose twin never comes back is accepted alone after the deadline") {
    TestServer server([](TaskConfig& c) { c.replication = 1.0; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto wu = alice.request_work().value();
    REQUIRE(alice.upload(wu, alice.made_up_delta(wu, 1e-3f)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, wu.wu_id) == "validated");
    server.advance(server.config().deadline_s + 1);
    auto report = server.app().transitioner().tick().value();
    CHECK(report.accepted_alone == 1);
    server.app().wait_idle();
    CHECK(state_of(server, wu.wu_id) == "merged");
    CHECK(server.version() == 1);
}

TEST_CASE("an accepted result reaches the aggregator when the doorbell rings, not at the election's next poll") {
    TestServer server({}, PolicyKind::FedAsync, [](ServerOptions& options) { options.election_poll_ms = 600000; });
    TestVolunteer alice(server, "alice");
    auto wu = alice.request_work().value();
    REQUIRE(alice.upload(wu, alice.made_up_delta(wu, 1e-3f)).status == 200);
    // No wait_idle (it reads the accepted results itself): with a ten-minute poll, only the
    // validator's ring can wake the election in time.
    CHECK(wait_for([&] { return server.version() == 1; }, std::chrono::seconds(60)));
    CHECK(state_of(server, wu.wu_id) == "merged");
}

TEST_CASE("an expert group: drawn as one by its weights together, each volunteer keeps its member") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 100; });
    auto ordinary = server.store().current_task().value().value().id;
    REQUIRE(server.store().set_task_weight(ordinary, 0).ok());
    for (std::string member : {"g-e0", "g-e1", "g-router"}) {
        auto config = server.config();
        config.task_id = member;
        config.expert_group = "g";
        config.expert_index = member == "g-router" ? kRouterIndex : member.back() - '0';
        if (member == "g-router") config.model = "router";
        REQUIRE(create_task(server.state(), server.store(), config).ok());
    }
    REQUIRE(server.app().refresh_tasks().ok());

    std::vector<std::unique_ptr<TestVolunteer>> volunteers;
    std::map<std::string, std::string> kept;  // volunteer → its member
    for (int v = 0; v < 12; ++v) {
        volunteers.push_back(std::make_unique<TestVolunteer>(server, "volunteer " + std::to_string(v)));
        auto& volunteer = *volunteers.back();
        auto first = volunteer.request_work().value().task_id;
        for (int i = 0; i < 4; ++i) CHECK(volunteer.request_work().value().task_id == first);
        kept[volunteer.id()] = first;
    }
    std::set<std::string> members;
    for (const auto& [name, member] : kept) members.insert(member);
    CHECK(members.size() >= 2);  // 12 volunteers over three equal members

    // A member paused: its volunteers move to the others, the rest keep theirs.
    auto paused = kept.begin()->second;
    REQUIRE(server.store().set_task_state(paused, TaskState::Paused, server.now()).ok());
    REQUIRE(server.app().refresh_tasks().ok());
    for (auto& volunteer : volunteers) {
        auto now = volunteer->request_work().value().task_id;
        CHECK(now != paused);
        if (kept[volunteer->id()] != paused) CHECK(now == kept[volunteer->id()]);
    }
}
