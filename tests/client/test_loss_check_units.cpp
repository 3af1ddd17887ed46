// Loss checks as units of their own (docs/operations.md, "Loss-check units") on a real server
// with real training and real evaluations: a trusted volunteer other than the result's answers
// for it and the server checks a sample of the answer; a forged answer is refused as a failed
// audit and the server checks the result itself; a result nobody answers for in time is checked
// by the server; an old client is not sent such a unit.
#include <doctest/doctest.h>

#include <filesystem>

#include "loss_report.h"
#include "rejection_reasons.h"
#include "result_upload.h"
#include "sha256.h"
#include "trained_units.h"
#include "training/loss_check_runner.h"
#include "validator.h"

using namespace tessera;
using namespace tessera::server;
using namespace tessera::testing;

namespace {

void checks_by_volunteers(TaskConfig& c) {
    c.check_by = "volunteers";
    c.loss_check = 1;
    c.max_in_flight = 10;
}

// The loss-check unit `wu` answered by `volunteer` as the client answers it, its report changed
// by `forge` when given; the upload's reply.
HttpReply answer(TestServer& server, TestVolunteer& volunteer, const common::WorkUnit& wu,
                 const std::function<void(common::LossReport&)>& forge = {}) {
    REQUIRE(wu.check);
    BlobStore blobs(server.state().blobs());
    client::CheckInputs inputs{blobs.path_of(wu.model_blob.sha256),
                               {},
                               blobs.path_of(wu.check->result.sha256),
                               blobs.path_of(wu.check->held_out.sha256)};
    for (const auto& shard : wu.shards) inputs.shards.push_back(blobs.path_of(shard.sha256));
    auto output = client::run_loss_check(wu, inputs, 1);
    REQUIRE_MESSAGE(output, output.message());
    auto report = output->report;
    if (forge) {
        auto parsed = common::parse_loss_report(std::string(report.begin(), report.end())).value();
        forge(parsed);
        auto text = common::loss_report_bytes(parsed);
        report.assign(text.begin(), text.end());
    }
    auto reply =
        volunteer.upload_bytes(common::result_manifest_of(wu, volunteer.id(), report, output->metrics, "cpu"), report);
    server.app().wait_idle();
    return reply;
}

}  // namespace

TEST_CASE("a result drawn for the loss checks is evaluated by another trusted volunteer, then merged") {
    TestServer server(checks_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto first = train_unit(server, alice);
    upload(server, alice, first, first.output.commitments);
    CHECK(state_of(server, first.wu.wu_id) == "returned");  // held for its check
    auto made = events_of(server, "loss_check_unit");
    REQUIRE(made.size() == 1);
    CHECK(made[0].at("assignment_id").as_string() == first.wu.wu_id);
    // A restart keeps the unit's blobs (the start-up sweep of unreferenced files spares them) and
    // the result held.
    server.stop();
    server.start();
    REQUIRE(server.app().validation().poll());
    server.app().wait_idle();
    CHECK(state_of(server, first.wu.wu_id) == "returned");

    // Alice is not asked to check her own result; Bob is, on her unit's base, shards and seed.
    auto own = alice.request_work().value();
    CHECK_FALSE(own.check);
    auto check = bob.request_work().value();
    REQUIRE(check.check);
    CHECK(check.check->result.sha256 == common::sha256_hex(first.output.delta));
    CHECK(check.check->samples == server.config().check_samples);
    CHECK(check.model_blob.sha256 == first.wu.model_blob.sha256);
    CHECK(check.hyper.seed == first.wu.hyper.seed);
    CHECK(check.shards.front().sha256 == first.wu.shards.front().sha256);
    CHECK(check.deadline - check.issued_at <= Validator::kCheckWaitS);

    REQUIRE(answer(server, bob, check).status == 200);
    CHECK(state_of(server, check.wu_id) == "confirmed");
    CHECK(rejection_of(server, first.wu.wu_id).empty());
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK(server.version() == 1);
    CHECK(server.store().client(bob.id()).value()->credit > 0);  // the check's forward passes
    // The server measured no loss of its own (only the answer's sample of rows).
    CHECK(metric(server, "tessera_checked_results_total{checks=\"loss\"}") == 0);
    // The result's file, published for the check, goes once the check is settled.
    BlobStore blobs(server.state().blobs());
    CHECK_FALSE(std::filesystem::exists(blobs.path_of(check.check->result.sha256)));
}

TEST_CASE("a forged answer is refused as a failed audit and the server checks the result itself") {
    TestServer server(checks_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto first = train_unit(server, alice);
    upload(server, alice, first, first.output.commitments);
    auto check = bob.request_work().value();
    REQUIRE(check.check);
    // A checker that passes whatever it is sent: every "after" loss a tenth below "before".
    REQUIRE(answer(server, bob, check, [](common::LossReport& r) {
                for (std::size_t i = 0; i < r.own_after.size(); ++i) r.own_after[i] = 0.9 * r.own_before[i];
                for (std::size_t i = 0; i < r.held_out_after.size(); ++i)
                    r.held_out_after[i] = 0.9 * r.held_out_before[i];
            }).status == 200);
    CHECK(rejection_of(server, check.wu_id) == reason::kCheckMismatch);
    CHECK(refusal_of(server, check.wu_id).find("the server measured") != std::string::npos);
    CHECK(server.store().client(bob.id()).value()->quarantined);
    CHECK(events_of(server, "audit_failed").size() == 1);
    // Alice's result is judged by the server's own loss checks.
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK(metric(server, "tessera_checked_results_total{checks=\"loss\"}") == 1);
    // A report that does not parse is refused the same way.
    auto second = train_unit(server, alice);
    upload(server, alice, second, second.output.commitments);
    TestVolunteer carol(server, "carol");
    auto next = carol.request_work().value();
    REQUIRE(next.check);
    common::Bytes garbage{'{', '}'};
    REQUIRE(carol.upload_bytes(common::result_manifest_of(next, carol.id(), garbage, {}, "cpu"), garbage).status ==
            200);
    server.app().wait_idle();
    CHECK(rejection_of(server, next.wu_id) == reason::kCheckMismatch);
    CHECK(refusal_of(server, next.wu_id).find("the report does not parse") != std::string::npos);
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    // A report of fewer rows than the check asked for, every loss true, is refused too.
    auto third = train_unit(server, alice);
    upload(server, alice, third, third.output.commitments);
    TestVolunteer erin(server, "erin");
    auto short_check = erin.request_work().value();
    REQUIRE(short_check.check);
    REQUIRE(answer(server, erin, short_check, [](common::LossReport& r) {
                r.own_before.pop_back();
                r.own_after.pop_back();
            }).status == 200);
    CHECK(rejection_of(server, short_check.wu_id) == reason::kCheckMismatch);
    CHECK(refusal_of(server, short_check.wu_id).find("the check asked for") != std::string::npos);
    CHECK(state_of(server, third.wu.wu_id) == "merged");
}

TEST_CASE("a result nobody answers for is checked by the server; an old client gets no loss-check unit") {
    TestServer server(checks_by_volunteers);
    TestVolunteer alice(server, "alice");
    TestVolunteer dave(server, "dave", "0.2.0");  // before loss-check units
    auto first = train_unit(server, alice);
    upload(server, alice, first, first.output.commitments);
    auto dave_s = dave.request_work().value();
    CHECK_FALSE(dave_s.check);
    REQUIRE(events_of(server, "loss_check_unit").size() == 1);
    // Held until the wait ends, then checked by the server.
    server.advance(10);
    REQUIRE(server.app().validation().poll().value() == 0);  // still held
    CHECK(state_of(server, first.wu.wu_id) == "returned");
    server.advance(Validator::kCheckWaitS + 1);
    REQUIRE(server.app().validation().poll().value() == 1);
    server.app().wait_idle();
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK(metric(server, "tessera_checked_results_total{checks=\"loss\"}") == 1);
    // The unit is retired: a volunteer that asks now is sent other work.
    TestVolunteer bob(server, "bob");
    auto later = bob.request_work().value();
    CHECK_FALSE(later.check);
}
