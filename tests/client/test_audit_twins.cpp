// Audit twins (docs/operations.md, "Audit twins"): a task that has its audits computed by
// volunteers gives a drawn result's unit again to a trusted volunteer and compares the two
// committed trajectories, with a real server and real CPU training. An honest result is merged
// once its twin agrees; one trained at another rate goes to a tie-break and is refused
// `audit_failed`, its volunteer quarantined; an untrusted volunteer is never given a twin; a
// twin no trusted volunteer computes in time is settled by the server's own replay; a twin trains
// on the schedule span of the result it audits, also when its unit was rebased after a timeout;
// a kept unit's twin resumes the moments its volunteer sent, published as a blob, and is sent
// only to clients that read it.
#include <doctest/doctest.h>

#include <algorithm>

#include "rejection_reasons.h"
#include "trained_units.h"
#include "trust.h"

using namespace tessera;
using namespace tessera::testing;
namespace reason = tessera::server::reason;

namespace {

void audits_by_volunteers(TaskConfig& c) {
    c.max_in_flight = 10;
    c.audit = 1;
    c.audit_by = "volunteers";
    c.inner_optimizer = common::InnerOptimizer::Fresh;
}

void kept_audits_by_volunteers(TaskConfig& c) {
    audits_by_volunteers(c);
    c.inner_optimizer = common::InnerOptimizer::Kept;
}

std::string unit_of(TestServer& server, const common::WorkUnit& wu) {
    return server.store().assignment(wu.wu_id).value()->work_unit_id;
}

}  // namespace

TEST_CASE("an audit twin agrees and the result is merged; one trained at another rate fails its audit") {
    TestServer server(audits_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");

    auto first = train_unit(server, alice);
    upload(server, alice, first, first.output.commitments);
    CHECK(state_of(server, first.wu.wu_id) == "validated");  // held for its twin
    CHECK(server.version() == 0);
    REQUIRE(events_of(server, "audit_twin").size() == 1);
    // The twin: the same unit, from zero moments, for the next trusted volunteer that asks.
    server.advance(10);
    auto twin_wu = bob.request_work().value();
    REQUIRE(unit_of(server, twin_wu) == unit_of(server, first.wu));
    CHECK(twin_wu.hyper.seed == first.wu.hyper.seed);
    CHECK(twin_wu.base_version == first.wu.base_version);
    auto twin = train(server, twin_wu);
    upload(server, bob, twin, twin.output.commitments);
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK(rejection_of(server, twin_wu.wu_id).empty());
    CHECK(server.version() == 1);
    CHECK(server.store().client(bob.id()).value()->credit > 0);  // the audit's compute is credited
    auto compared = events_of(server, "replicas_compared");
    REQUIRE(compared.size() == 1);
    CHECK(compared[0].at("compared").as_string() == "commitments");
    CHECK(events_of(server, "audit_passed").size() == 2);

    // Alice trains her next unit at 1.05 times the rate: her twin disagrees, a third trusted
    // volunteer settles it, and she is refused as a failed audit is.
    server.advance(10);
    auto wu = alice.request_work().value();
    auto misread = train_at_rate(server, wu, 1.05);
    upload(server, alice, misread, misread.output.commitments);
    auto bobs = train(server, bob.request_work().value());
    REQUIRE(unit_of(server, bobs.wu) == unit_of(server, wu));
    upload(server, bob, bobs, bobs.output.commitments);
    CHECK(events_of(server, "replica_tiebreak").size() == 1);
    auto tiebreak = carol.request_work().value();
    REQUIRE(unit_of(server, tiebreak) == unit_of(server, wu));
    auto third = train(server, tiebreak);
    upload(server, carol, third, third.output.commitments);
    CHECK(rejection_of(server, wu.wu_id) == reason::kAuditFailed);
    CHECK(refusal_of(server, wu.wu_id).find("its audit twin, computed again by a trusted volunteer, disagrees") !=
          std::string::npos);
    CHECK(server.store().client(alice.id()).value()->quarantined);
    CHECK(server.version() == 2);

    // The record of audits: GET /api/v1/audits (the dashboard's "Audits" card) and /metrics.
    auto audits = boost::json::parse(http_get(server.port(), "/api/v1/audits?limit=4").body).as_object();
    const auto& counts = audits.at("counts").as_object();
    CHECK(counts.at("audit_failed").as_int64() == 1);
    CHECK(counts.at("audit_twin").as_int64() == 2);
    CHECK(counts.at("audit_passed").as_int64() == static_cast<std::int64_t>(events_of(server, "audit_passed").size()));
    CHECK(metric(server, "tessera_audit_events_total{kind=\"audit_failed\"}") == 1);
    CHECK(metric(server, "tessera_audit_events_total{kind=\"audit_twin\"}") == 2);
    const auto& newest = audits.at("events").as_array();
    REQUIRE(newest.size() == 4);
    for (std::size_t i = 1; i < newest.size(); ++i)
        CHECK(newest[i].at("id").as_int64() < newest[i - 1].at("id").as_int64());
    auto failed = std::find_if(newest.begin(), newest.end(),
                               [](const auto& e) { return e.at("kind").as_string() == "audit_failed"; });
    REQUIRE(failed != newest.end());
    CHECK(failed->at("detail").at("assignment_id").as_string() == wu.wu_id);
    CHECK(failed->at("detail").at("client_id").as_string() == alice.id());
}

TEST_CASE("an untrusted volunteer is not given a twin; a twin nobody computes in time is replayed by the server") {
    TestServer server([](TaskConfig& c) {
        audits_by_volunteers(c);
        c.trust_streak = 2;  // nobody is trusted yet; their results are all drawn (10 × the rate)
    });
    TestVolunteer erin(server, "erin");
    TestVolunteer dave(server, "dave");

    auto honest = train_unit(server, erin);
    upload(server, erin, honest, honest.output.commitments);
    CHECK(state_of(server, honest.wu.wu_id) == "validated");
    server.advance(10);
    auto other = dave.request_work().value();
    CHECK(unit_of(server, other) != unit_of(server, honest.wu));  // a new unit, not the twin

    auto wu = erin.request_work().value();
    auto misread = train_at_rate(server, wu, 1.5);
    upload(server, erin, misread, misread.output.commitments);
    CHECK(state_of(server, wu.wu_id) == "validated");

    // No trusted volunteer came within the deadline: the server replays both itself.
    server.advance(server.config().deadline_s + 10);
    server.app().transitioner().tick().value();
    server.app().wait_idle();
    CHECK(state_of(server, honest.wu.wu_id) == "merged");
    CHECK(rejection_of(server, wu.wu_id) == reason::kAuditFailed);
    CHECK(refusal_of(server, wu.wu_id).find("no trusted volunteer settled its audit twin in time") !=
          std::string::npos);
    CHECK(metric(server, "tessera_checked_results_total{checks=\"audit\"}") == 2);
}

TEST_CASE("an audit twin of a unit rebased after a timeout trains on the audited result's schedule span") {
    TestServer server([](TaskConfig& c) {
        audits_by_volunteers(c);
        LrScheduleFlags flags;
        flags.name = "cosine";
        flags.warmup_samples = 64;
        flags.total_samples = 2000;
        c.lr_schedule = lr_schedule_from_flags(flags, c).value();
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    TestVolunteer dave(server, "dave");
    TestVolunteer erin(server, "erin");

    auto abandoned = alice.request_work().value();  // times out below
    // Another unit and its twin agree and merge: the base moves on.
    auto other = train_unit(server, carol);
    upload(server, carol, other, other.output.commitments);
    server.advance(10);
    auto other_twin = train(server, erin.request_work().value());
    REQUIRE(unit_of(server, other_twin.wu) == unit_of(server, other.wu));
    upload(server, erin, other_twin, other_twin.output.commitments);
    REQUIRE(server.version() == 1);
    server.advance(server.config().deadline_s + 10);
    server.app().transitioner().tick().value();

    // Given again on the newer base, it is stamped where the schedule stands now.
    auto rebased = train(server, bob.request_work().value());
    REQUIRE(unit_of(server, rebased.wu) == unit_of(server, abandoned));
    REQUIRE(rebased.wu.base_version == 1);
    REQUIRE(rebased.wu.hyper.schedule_from != abandoned.hyper.schedule_from);
    upload(server, bob, rebased, rebased.output.commitments);
    auto twin_wu = dave.request_work().value();
    REQUIRE(unit_of(server, twin_wu) == unit_of(server, abandoned));
    CHECK(twin_wu.hyper.schedule_from == rebased.wu.hyper.schedule_from);
    CHECK(twin_wu.hyper.schedule_to == rebased.wu.hyper.schedule_to);
    auto twin = train(server, twin_wu);
    upload(server, dave, twin, twin.output.commitments);
    CHECK(state_of(server, rebased.wu.wu_id) == "merged");
    CHECK(server.version() == 2);
}

TEST_CASE("a kept task's unit from zero moments is replayed by the server, not twinned (kept units clip updates)") {
    TestServer server(kept_audits_by_volunteers);
    TestVolunteer alice(server, "alice");
    auto first = train_unit(server, alice);
    REQUIRE(first.wu.hyper.optimizer == common::InnerOptimizer::Kept);
    upload(server, alice, first, first.output.commitments);
    CHECK(events_of(server, "audit_twin").empty());
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK(metric(server, "tessera_checked_results_total{checks=\"audit\"}") == 1);
}

TEST_CASE(
    "a resumed kept unit is twinned from the moments its volunteer sent: the twin resumes them from a blob, leaves its "
    "own moments alone and agrees; an older client is not sent it; the blob goes once the unit settles") {
    TestServer server(kept_audits_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    client::KeptOptimizerState alices, bobs;
    client::RunOptions run;
    run.optimizer = &alices;
    const std::string replays = "tessera_checked_results_total{checks=\"audit\"}";
    auto first = train(server, alice.request_work().value(), run);  // from zero moments: the server replays it
    CHECK_FALSE(upload(server, alice, first, first.output.commitments));
    CHECK(state_of(server, first.wu.wu_id) == "merged");

    server.advance(10);
    auto resumed = alices;
    auto second = train(server, alice.request_work().value(), run);
    REQUIRE_FALSE(second.output.commitments.moments_in->sha256.empty());
    CHECK(upload(server, alice, second, second.output.commitments));  // its moments asked for
    REQUIRE(send_moments(alice, second.wu.wu_id, resumed).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, second.wu.wu_id) == "validated");  // held for its twin, not replayed
    CHECK(metric(server, replays) == 1);
    auto made = events_of(server, "audit_twin");
    REQUIRE(made.size() == 1);
    REQUIRE(made[0].contains("moments"));
    const std::string sha256(made[0].at("moments").as_string());
    server::BlobStore blobs(server.state().blobs());
    CHECK(blobs.has(sha256));

    server.advance(10);
    // A client older than the field's release would refuse the unit and stop: it gets other work.
    TestVolunteer dave(server, "dave", "0.1.0");
    CHECK(unit_of(server, dave.request_work().value()) != unit_of(server, second.wu));
    auto twin_wu = bob.request_work().value();
    REQUIRE(unit_of(server, twin_wu) == unit_of(server, second.wu));
    REQUIRE(twin_wu.moments);
    CHECK(twin_wu.moments->sha256 == sha256);
    CHECK(twin_wu.hyper.optimizer == common::InnerOptimizer::Kept);  // clipped as the audited unit was
    client::RunOptions bobs_run;
    bobs_run.optimizer = &bobs;
    bobs_run.twin_moments = blobs.path_of(sha256);
    auto twin = train(server, twin_wu, bobs_run);
    CHECK(bobs.empty());  // the auditor's own kept moments neither read nor replaced
    CHECK(twin.output.commitments.moments_in == second.output.commitments.moments_in);
    CHECK_FALSE(upload(server, bob, twin, twin.output.commitments));  // the twin is the audit: none drawn
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    CHECK(rejection_of(server, twin_wu.wu_id).empty());
    CHECK(events_of(server, "replicas_compared").back().at("compared").as_string() == "commitments");
    CHECK(metric(server, replays) == 1);  // the server replayed nothing more
    CHECK_FALSE(blobs.has(sha256));
}

TEST_CASE(
    "a kept unit's twin: moments not those its commitments name fail at once; a twin nobody computes is replayed by "
    "the server from the moments sent") {
    TestServer server(kept_audits_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer carol(server, "carol");
    client::KeptOptimizerState alices, carols;
    client::RunOptions run;
    run.optimizer = &alices;
    auto first = train(server, alice.request_work().value(), run);
    upload(server, alice, first, first.output.commitments);
    run.optimizer = &carols;
    auto carols_first = train(server, carol.request_work().value(), run);
    upload(server, carol, carols_first, carols_first.output.commitments);

    // Carol sends other moments than those her unit resumed: refused as a failed audit, no twin.
    auto resumed = carols;
    auto forged = train(server, carol.request_work().value(), run);
    REQUIRE(upload(server, carol, forged, forged.output.commitments));
    resumed.exp_avg.front().values.front() += 1e-3f;
    REQUIRE(send_moments(carol, forged.wu.wu_id, resumed).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, forged.wu.wu_id) == reason::kAuditFailed);
    CHECK(refusal_of(server, forged.wu.wu_id).find("not those its commitments name") != std::string::npos);
    CHECK(events_of(server, "audit_twin").empty());

    // Alice's resumed unit is twinned, and nobody computes the twin within the deadline.
    run.optimizer = &alices;
    resumed = alices;
    auto second = train(server, alice.request_work().value(), run);
    REQUIRE(upload(server, alice, second, second.output.commitments));
    REQUIRE(send_moments(alice, second.wu.wu_id, resumed).status == 200);
    server.app().wait_idle();
    REQUIRE(events_of(server, "audit_twin").size() == 1);
    const std::string sha256(events_of(server, "audit_twin")[0].at("moments").as_string());
    server.advance(server.config().deadline_s + 10);
    server.app().transitioner().tick().value();
    server.app().wait_idle();
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    CHECK(events_of(server, "audit_passed").back().at("assignment_id").as_string() == second.wu.wu_id);
    CHECK_FALSE(server::BlobStore(server.state().blobs()).has(sha256));  // its unit settled
}
