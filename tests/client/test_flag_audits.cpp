// Statistical flags settled by replays (docs/operations.md, "Replay audits"): a result a
// statistical check would refuse (here every result: the task's calibrated norm is cut to a
// hundredth, so each honest one is "too large") is replayed by the server when it can be, and
// the exact replay decides — an honest result is merged, one trained at another rate fails its
// audit. A kept unit that resumed moments is held until its volunteer sends them (its status
// asks); a result that cannot be replayed, and any result of a quarantined volunteer, keeps the
// statistical refusal; a flag the loss checks raised stays counted, with the gain they measured,
// through the second validation. Real server, real CPU training, and the real client.
#include <doctest/doctest.h>

#include "calibration.h"
#include "rejection_reasons.h"
#include "trained_units.h"
#include "volunteer_fixture.h"

using namespace tessera;
using namespace tessera::testing;
namespace reason = tessera::server::reason;

namespace {

const std::string kReplayed = "tessera_checked_results_total{checks=\"audit\"}";

// Audits on but never drawn, so only flags replay; each honest result's norm 100 × the typical.
std::function<void(TaskConfig&)> flagging_task(common::InnerOptimizer optimizer) {
    return [optimizer](TaskConfig& c) {
        c.max_in_flight = 10;
        c.audit = 1e-9;
        c.inner_optimizer = optimizer;
    };
}

void shrink_typical_norm(TestServer& server) {
    auto calibration = server::load_calibration(server.store(), server.config().task_id).value().value();
    calibration.norm_per_step /= 100;
    REQUIRE(server::save_calibration(server.store(), server.config().task_id, calibration));
}

}  // namespace

TEST_CASE("a flagged result is replayed: an honest one is merged, one trained at another rate fails its audit") {
    TestServer server(flagging_task(common::InnerOptimizer::Fresh));
    shrink_typical_norm(server);
    TestVolunteer volunteer(server);

    auto honest = train_unit(server, volunteer);
    upload(server, volunteer, honest, honest.output.commitments);
    CHECK(rejection_of(server, honest.wu.wu_id).empty());
    CHECK(state_of(server, honest.wu.wu_id) == "merged");
    CHECK(metric(server, kReplayed) == 1);
    auto passed = events_of(server, "audit_passed");
    REQUIRE(passed.size() == 1);
    CHECK(passed[0].at("flagged").as_string().starts_with("norm_too_large: "));

    // Sent without commitments, a result could not be replayed: a task with audits refuses it
    // at its upload, before any flag.
    server.advance(10);
    auto bare = train_unit(server, volunteer);
    CHECK(volunteer.upload_bytes(volunteer.manifest_for(bare.wu, bare.output.delta), bare.output.delta).status == 422);
    CHECK(rejection_of(server, bare.wu.wu_id) == reason::kCommitmentsMissing);
    CHECK(metric(server, kReplayed) == 1);

    server.advance(10);
    auto wu = volunteer.request_work().value();
    auto misread = train_at_rate(server, wu, 1.5);
    upload(server, volunteer, misread, misread.output.commitments);
    CHECK(rejection_of(server, wu.wu_id) == reason::kAuditFailed);
    auto why = refusal_of(server, wu.wu_id);
    CHECK(why.find("flagged norm_too_large") != std::string::npos);
    CHECK(why.find("); its replay disagrees") != std::string::npos);
    CHECK(server.store().client(volunteer.id()).value()->quarantined);
    CHECK(metric(server, kReplayed) == 2);

    // Quarantined: its flags are refused without a replay (a hostile volunteer cannot make the
    // server train for it), though the result is honest.
    server.advance(10);
    auto after = train_unit(server, volunteer);
    upload(server, volunteer, after, after.output.commitments);
    CHECK(rejection_of(server, after.wu.wu_id) == reason::kNormTooLarge);
    CHECK(metric(server, kReplayed) == 2);
}

TEST_CASE(
    "a flagged kept unit that resumed moments is held for them: sent, its replay decides; a restart keeps it waiting; "
    "withheld, it is refused after the wait") {
    TestServer server(flagging_task(common::InnerOptimizer::Kept));
    shrink_typical_norm(server);
    TestVolunteer volunteer(server);
    client::KeptOptimizerState kept;
    client::RunOptions run;
    run.optimizer = &kept;

    auto first = train(server, volunteer.request_work().value(), run);  // from zero moments: replayable
    CHECK_FALSE(upload(server, volunteer, first, first.output.commitments));
    CHECK(state_of(server, first.wu.wu_id) == "merged");
    CHECK_FALSE(result_status(volunteer, first.wu.wu_id).moments_wanted);

    // Resumed: not drawn, so not asked for at the upload; the flag asks for them.
    server.advance(10);
    auto resumed = kept;
    auto second = train(server, volunteer.request_work().value(), run);
    REQUIRE_FALSE(second.output.commitments.moments_in->sha256.empty());
    CHECK_FALSE(upload(server, volunteer, second, second.output.commitments));
    auto status = result_status(volunteer, second.wu.wu_id);
    CHECK(status.state == "returned");
    CHECK(status.moments_wanted);
    auto asked = events_of(server, "moments_asked");
    REQUIRE(asked.size() == 1);
    CHECK(asked[0].at("flagged").as_string().starts_with("norm_too_large: "));
    REQUIRE(send_moments(volunteer, second.wu.wu_id, resumed).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    CHECK_FALSE(result_status(volunteer, second.wu.wu_id).moments_wanted);
    CHECK(metric(server, kReplayed) == 2);
    auto passed = events_of(server, "audit_passed");
    REQUIRE(passed.size() == 2);
    CHECK(passed[1].at("flagged").as_string().starts_with("norm_too_large: "));

    // A graceful stop gives its claim up; validated again, it still waits for the moments, until
    // the wait is over.
    server.advance(10);
    auto third = train(server, volunteer.request_work().value(), run);
    CHECK_FALSE(upload(server, volunteer, third, third.output.commitments));
    REQUIRE(server.app().validation().release());
    REQUIRE(server.app().validation().poll());
    server.app().wait_idle();
    CHECK(result_status(volunteer, third.wu.wu_id).moments_wanted);
    server.advance(server::kMomentsWaitS + 1);
    REQUIRE(server.app().validation().poll());
    server.app().wait_idle();
    CHECK(rejection_of(server, third.wu.wu_id) == reason::kMomentsWithheld);
    CHECK(metric(server, kReplayed) == 2);
    CHECK(metric(server, "tessera_checked_results_total{checks=\"unauditable\"}") == 0);  // none was drawn
}

TEST_CASE(
    "a kept result the loss checks flagged, held for its moments and replayed, counts as an overruled flag and keeps "
    "the gain they measured") {
    TestServer server([](TaskConfig& c) {
        flagging_task(common::InnerOptimizer::Kept)(c);
        c.loss_check = 1;
    });
    // The gain margin, drawn from the calibration until five gains are known, far above any unit's.
    auto calibration = server::load_calibration(server.store(), server.config().task_id).value().value();
    calibration.gain_per_step *= 1000;
    REQUIRE(server::save_calibration(server.store(), server.config().task_id, calibration));
    TestVolunteer volunteer(server);
    client::KeptOptimizerState kept;
    client::RunOptions run;
    run.optimizer = &kept;
    auto first = train(server, volunteer.request_work().value(), run);
    CHECK_FALSE(upload(server, volunteer, first, first.output.commitments));
    CHECK(state_of(server, first.wu.wu_id) == "merged");  // replayed at once: from zero moments

    server.advance(10);
    auto resumed = kept;
    auto second = train(server, volunteer.request_work().value(), run);
    CHECK_FALSE(upload(server, volunteer, second, second.output.commitments));
    REQUIRE(result_status(volunteer, second.wu.wu_id).moments_wanted);
    REQUIRE(send_moments(volunteer, second.wu.wu_id, resumed).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    auto passed = events_of(server, "audit_passed");
    REQUIRE(passed.size() == 2);
    CHECK(passed[0].at("flagged").as_string().starts_with("no_improvement: "));
    // The second validation replayed it and skipped the loss checks: the flag and gain are the first's.
    REQUIRE(passed[1].contains("flagged"));
    CHECK(passed[1].at("flagged").as_string().starts_with("no_improvement: "));
    auto record = server.store().assignment(second.wu.wu_id).value().value();
    CHECK(record.gain_per_step.has_value());
    CHECK(record.full_rate_steps.has_value());
}

TEST_CASE("the real client sends a flagged kept unit's moments when its result's status asks for them") {
    TestServer server([](TaskConfig& c) {
        flagging_task(common::InnerOptimizer::Kept)(c);
        c.replication = 0;     // replicated units train afresh
        c.target_seconds = 0;  // every unit H steps
    });
    shrink_typical_norm(server);
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    for (int unit = 0; unit < 2; ++unit) {  // the second resumes the first's moments
        client::VolunteerControl control;
        auto stop = client::run_volunteer(options, control);
        INFO(stop.message);
        REQUIRE(stop.reason == client::StopReason::OnceDone);
        server.app().wait_idle();
    }
    auto asked = events_of(server, "moments_asked");
    REQUIRE(asked.size() == 1);
    auto second = std::string(asked[0].at("assignment_id").as_string());
    CHECK(state_of(server, second) == "merged");
    auto passed = events_of(server, "audit_passed");
    REQUIRE(passed.size() == 2);  // both flagged, both replayed
    CHECK(passed[1].at("assignment_id").as_string() == second);
    CHECK(passed[1].contains("flagged"));
}
