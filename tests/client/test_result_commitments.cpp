// A trained unit's commitments judged by a real in-process server (docs/protocol.md,
// "Commitments"): an honest CPU volunteer's result is merged, its opening loss recomputed by the
// server to the CPU tolerance; a forged opening loss and a unit trained from a stale base are
// refused as opening_loss_mismatch; a result without commitments skips the checks; a cnn task
// (dropout drawn from the unit's stream) reproduces its opening losses too. Replay audits
// (replay_audit.h): an honest unit replays within the CPU tolerance whatever the thread count;
// a trusted volunteer's unit trained at another rate and a delta scaled after training with
// forged commitments fail theirs; a kept unit's audit asks for the moments it started from, replays from them, fails
// other moments and refuses the result when they never come.
// Replicas with commitments are compared by their trajectories: a twin trained at a slightly
// other rate, whose delta lies within the delta tolerance, is caught and settled by a tie-break.
#include <doctest/doctest.h>

#include <algorithm>

#include <boost/json.hpp>

#include "optimizer_moments.h"
#include "rejection_reasons.h"
#include "replay_audit.h"
#include "result_upload.h"
#include "trained_units.h"
#include "trust.h"
#include "zstd_codec.h"

using namespace tessera;
using namespace tessera::testing;
namespace reason = tessera::server::reason;

TEST_CASE("an honest unit's commitments pass; a forged opening loss and a stale base are refused") {
    // At the default rate one unit moves a batch's loss by 1e-4 to 1e-2 relative (60 runs), so
    // a base one version stale passed the CPU's 1e-4 about one time in thirty; at thirty times the
    // rate it moves it by 0.6 or more (30 runs).
    TestServer server([](TaskConfig& c) {
        c.max_in_flight = 10;
        c.lr *= 30;
    });
    TestVolunteer volunteer(server);

    auto honest = train_unit(server, volunteer);
    CHECK(honest.output.device.starts_with("cpu"));
    upload(server, volunteer, honest, honest.output.commitments);
    CHECK(state_of(server, honest.wu.wu_id) == "merged");
    REQUIRE(server.version() == 1);

    auto forged = train_unit(server, volunteer);
    auto c = forged.output.commitments;
    c.segments.front().loss *= 1.01;  // 1 %: far outside the CPU's 1e-4
    upload(server, volunteer, forged, c);
    CHECK(rejection_of(server, forged.wu.wu_id) == reason::kOpeningLossMismatch);
    CHECK(refusal_of(server, forged.wu.wu_id).find("its commitments report") != std::string::npos);

    // Trained from version 0 while the unit names version 1, its commitments true to that
    // training: the delta keeps their identity, but the opening loss is version 0's.
    server::BlobStore blobs(server.state().blobs());
    auto stale = train_unit(server, volunteer, blobs.path_of(honest.wu.model_blob.sha256));
    REQUIRE(stale.wu.base_version == 1);
    upload(server, volunteer, stale, stale.output.commitments);
    CHECK_MESSAGE(rejection_of(server, stale.wu.wu_id) == reason::kOpeningLossMismatch,
                  (state_of(server, stale.wu.wu_id) + ": " + refusal_of(server, stale.wu.wu_id)));

    // Without commitments the result is judged by the other checks alone.
    auto plain = train_unit(server, volunteer);
    upload(server, volunteer, plain, std::nullopt);
    CHECK(state_of(server, plain.wu.wu_id) == "merged");
}

TEST_CASE("a cnn unit's opening loss, dropout drawn from the unit's stream, is reproduced by the server") {
    TestServer server({}, PolicyKind::FedAsync, {}, SyntheticKind::Pixels);
    TestVolunteer volunteer(server);
    for (int i = 0; i < 3; ++i) {
        auto honest = train_unit(server, volunteer);
        upload(server, volunteer, honest, honest.output.commitments);
        CHECK(state_of(server, honest.wu.wu_id) == "merged");
    }
    CHECK(server.version() == 3);
}

TEST_CASE("a unit trained with one thread and with four agrees within the CPU's replay tolerance") {
    TestServer server;
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    client::RunOptions four;
    four.threads = 4;
    auto one = train(server, wu);
    auto other = train(server, wu, four);
    auto apart =
        common::trajectory_mismatch(one.output.commitments, other.output.commitments, server::kCpuReplayTolerance);
    CHECK_MESSAGE(apart.empty(), apart);
    // A rate 1.5 times the unit's is a trajectory of its own.
    auto misread = train_at_rate(server, wu, 1.5);
    CHECK_FALSE(
        common::trajectory_mismatch(one.output.commitments, misread.output.commitments, server::kCpuReplayTolerance)
            .empty());
}

TEST_CASE(
    "replay audits: honest units pass; results without commitments are refused at their upload; a trusted "
    "volunteer that turns hostile (another rate) fails and is quarantined; a delta scaled after training with "
    "forged commitments fails") {
    TestServer server([](TaskConfig& c) {
        c.max_in_flight = 10;
        c.audit = 1;
        c.trust_streak = 3;
        c.inner_optimizer = common::InnerOptimizer::Fresh;
    });
    TestVolunteer volunteer(server);
    const std::string audited = "tessera_checked_results_total{checks=\"audit\"}";

    // A streak of honest, audited results: the volunteer is trusted from then on.
    Trained honest;
    for (int i = 0; i < 3; ++i) {
        honest = train_unit(server, volunteer);
        upload(server, volunteer, honest, honest.output.commitments);
        CHECK(state_of(server, honest.wu.wu_id) == "merged");
        server.advance(10);
    }
    CHECK(metric(server, audited) == 3);
    CHECK(server::is_trusted(server.config(), *server.store().client(volunteer.id()).value()));
    auto credit_of = [&] { return server.store().client(volunteer.id()).value()->credit; };
    const double audited_credit = credit_of();
    REQUIRE(audited_credit > 0);

    // Sent without commitments, or without the moments they started from, a result could not be
    // replayed: the task refuses it at its upload.
    server.advance(10);
    auto bare = train_unit(server, volunteer);
    auto manifest = volunteer.manifest_for(bare.wu, bare.output.delta);
    manifest.device = bare.output.device;
    manifest.commitments = bare.output.commitments;
    manifest.commitments->moments_in.reset();
    auto reply = volunteer.upload_bytes(manifest, bare.output.delta);
    CHECK(reply.status == 422);
    CHECK(reply.body.find("commitments_missing") != std::string::npos);
    CHECK(rejection_of(server, bare.wu.wu_id) == reason::kCommitmentsMissing);
    server.advance(10);
    auto unaudited = volunteer.request_work().value();
    manifest = volunteer.manifest_for(unaudited, bare.output.delta);
    REQUIRE(volunteer.upload_bytes(manifest, bare.output.delta).status == 422);
    CHECK(rejection_of(server, unaudited.wu_id) == reason::kCommitmentsMissing);
    CHECK(credit_of() == doctest::Approx(audited_credit));
    CHECK(metric(server, "tessera_checked_results_total{checks=\"unauditable\"}") == 0);
    server.advance(10);

    // Trained at 1.5 times the rate: its commitments are true to what it trained, its opening
    // loss is the unit's (the rate acts from the first update), so only the replay tells.
    auto wu = volunteer.request_work().value();
    auto misread = train_at_rate(server, wu, 1.5);
    upload(server, volunteer, misread, misread.output.commitments);
    CHECK(rejection_of(server, wu.wu_id) == reason::kAuditFailed);
    CHECK(refusal_of(server, wu.wu_id).find("its replay disagrees: the segment ending at step") != std::string::npos);
    // A failed audit quarantines at once (three statistical refusals would otherwise) and takes
    // back the credit of what was returned since the last clean audit, naming it.
    CHECK(server.store().client(volunteer.id()).value()->quarantined);
    // Nothing was credited since the clean audit (the span's listing: tests/server/test_store.cpp).
    CHECK(credit_of() == doctest::Approx(audited_credit));

    // Scaled by 2 after training, its last segment forged to keep the identity with the upload.
    auto scaled = train_unit(server, volunteer);
    auto decoded = common::decode_delta(common::zstd_decompress(scaled.output.delta, 1 << 26).value()).value();
    for (auto& t : decoded.tensors)
        for (auto& v : t.values) v *= 2.0f;
    scaled.output.delta = common::encode_delta(decoded.tensors, scaled.wu.encoding).value().bytes;
    auto sent = common::decode_delta(scaled.output.delta).value().tensors;
    auto forged = scaled.output.commitments;
    auto seed = static_cast<std::uint64_t>(scaled.wu.hyper.seed);
    forged.segments.back().sketch = common::add_sketches(
        common::add_sketches(common::commitment_sketch(sent, seed), forged.residual_in.sketch, -1.0),
        forged.residual_out.sketch);
    forged.segments.back().norm *= 2;
    REQUIRE(common::commitments_mismatch(forged, sent, scaled.wu.hyper.local_steps, seed).empty());
    upload(server, volunteer, scaled, forged);
    CHECK(rejection_of(server, scaled.wu.wu_id) == reason::kAuditFailed);
    CHECK(metric(server, audited) == 5);
}

TEST_CASE(
    "a kept unit drawn for an audit: its upload's answer asks for the moments it started from; sent, it is replayed; "
    "other moments fail the audit; withheld, it is refused after the wait") {
    TestServer server([](TaskConfig& c) {
        c.max_in_flight = 10;
        c.audit = 1;
        c.inner_optimizer = common::InnerOptimizer::Kept;
    });
    TestVolunteer volunteer(server);
    client::KeptOptimizerState kept;
    client::RunOptions run;
    run.optimizer = &kept;
    auto post_result = [&](const Trained& t) { return upload(server, volunteer, t, t.output.commitments); };
    const std::string audited = "tessera_checked_results_total{checks=\"audit\"}";

    auto first = train(server, volunteer.request_work().value(), run);  // from zero moments: none asked for
    CHECK_FALSE(post_result(first));
    CHECK(state_of(server, first.wu.wu_id) == "merged");

    // Resumed: asked for, held until they come, then replayed from them.
    auto resumed = kept;
    auto second = train(server, volunteer.request_work().value(), run);
    REQUIRE_FALSE(second.output.commitments.moments_in->sha256.empty());
    CHECK(post_result(second));
    CHECK(state_of(server, second.wu.wu_id) == "returned");
    auto garbage = volunteer.post("/api/v1/results/moments", "\x05");
    CHECK(garbage.status == 400);
    auto sent = send_moments(volunteer, second.wu.wu_id, resumed);
    REQUIRE_MESSAGE(sent.status == 200, sent.body);
    CHECK(send_moments(volunteer, second.wu.wu_id, resumed).status == 409);  // once
    server.app().wait_idle();
    CHECK(state_of(server, second.wu.wu_id) == "merged");
    CHECK(metric(server, audited) == 2);
    CHECK(metric(server, "tessera_checked_results_total{checks=\"unauditable\"}") == 0);

    // Other moments than those it resumed: the audit says so.
    resumed = kept;
    auto third = train(server, volunteer.request_work().value(), run);
    CHECK(post_result(third));
    auto other = resumed;
    other.exp_avg.front().values.front() += 1e-3f;
    REQUIRE(send_moments(volunteer, third.wu.wu_id, other).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, third.wu.wu_id) == reason::kAuditFailed);
    CHECK(refusal_of(server, third.wu.wu_id).find("not those its commitments name") != std::string::npos);

    // Withheld: validated once the wait is over, and refused.
    auto fourth = train(server, volunteer.request_work().value(), run);
    CHECK(post_result(fourth));
    server.advance(server::kMomentsWaitS + 1);
    REQUIRE(server.app().validation().poll());
    server.app().wait_idle();
    CHECK(rejection_of(server, fourth.wu.wu_id) == reason::kMomentsWithheld);
    CHECK(send_moments(volunteer, fourth.wu.wu_id, kept).status == 409);  // too late
    CHECK(send_moments(volunteer, first.wu.wu_id, kept).status == 409);   // none asked for
    // Last: a second volunteer would have the quarantined one's units replicated (afresh).
    TestVolunteer intruder(server, "intruder");  // not its unit: as if it did not exist
    CHECK(send_moments(intruder, fourth.wu.wu_id, kept).status == 404);
}

TEST_CASE(
    "replicas with commitments are compared by their trajectories: honest twins agree; a twin trained at 1.05 times "
    "the rate, within the delta tolerance, goes to a tie-break and is refused") {
    TestServer server([](TaskConfig& c) {
        c.max_in_flight = 10;
        c.replication = 1;
        c.inner_optimizer = common::InnerOptimizer::Fresh;
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    auto twins = [&] {
        auto first = alice.request_work().value();
        server.advance(10);
        auto second = bob.request_work().value();
        REQUIRE(server.store().assignment(second.wu_id).value()->work_unit_id ==
                server.store().assignment(first.wu_id).value()->work_unit_id);
        return std::pair(first, second);
    };
    auto comparisons = [&] { return events_of(server, "replicas_compared"); };

    auto [wu_a, wu_b] = twins();
    auto a = train(server, wu_a);
    auto b = train(server, wu_b);
    upload(server, alice, a, a.output.commitments);
    upload(server, bob, b, b.output.commitments);
    CHECK(server.version() == 1);
    REQUIRE(comparisons().size() == 1);
    CHECK(comparisons()[0].at("compared").as_string() == "commitments");
    CHECK(comparisons()[0].at("mismatch").as_string().empty());

    auto [wu_c, wu_d] = twins();
    auto honest = train(server, wu_c);
    auto misread = train_at_rate(server, wu_d, 1.05);
    upload(server, alice, honest, honest.output.commitments);
    upload(server, bob, misread, misread.output.commitments);
    REQUIRE(comparisons().size() == 2);
    auto pair = comparisons()[1];
    CHECK_FALSE(pair.at("mismatch").as_string().empty());
    // The deltas alone would have agreed: the distance is within the delta tolerance.
    CHECK(pair.at("relative_l2").to_number<double>() <
          pair.at("tolerance").to_number<double>() + pair.at("allowance").to_number<double>());
    CHECK(state_of(server, misread.wu.wu_id) == "validated");  // held for the tie-break
    auto tiebreak = carol.request_work().value();
    REQUIRE(server.store().assignment(tiebreak.wu_id).value()->work_unit_id ==
            server.store().assignment(wu_c.wu_id).value()->work_unit_id);
    auto third = train(server, tiebreak);
    upload(server, carol, third, third.output.commitments);
    CHECK(rejection_of(server, misread.wu.wu_id) == reason::kReplicaMismatch);
    CHECK(refusal_of(server, misread.wu.wu_id).find("its committed trajectory parts") != std::string::npos);
    CHECK(server.version() == 2);
}
