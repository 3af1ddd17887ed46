// Validation over real HTTP: every rejection reason, each stored with its reason, no credit
// for rejected work, and accepted results merged into new versions.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "faulty_file_system.h"
#include "polling.h"
#include "rejection_reasons.h"
#include "result_files.h"
#include "server_fixture.h"

using namespace tessera;
using namespace tessera::testing;
namespace reason = tessera::server::reason;

namespace {

// Uploads `delta` for a fresh work unit and waits for validation; returns the work unit.
common::WorkUnit submit(TestServer& server, TestVolunteer& volunteer, const common::NamedTensors& delta,
                        int expected_status = 200) {
    auto wu = volunteer.request_work().value();
    auto reply = volunteer.upload(wu, delta);
    CHECK_MESSAGE(reply.status == expected_status, reply.body);
    server.app().wait_idle();
    return wu;
}

// What a volunteer that trained `trained` commits to when it uploads `encoded`: segments along
// the straight line to `trained`, no residual in, and what the encoding left out.
common::Commitments commitments_for(const common::WorkUnit& wu, common::NamedTensors trained,
                                    const common::Bytes& encoded) {
    auto seed = static_cast<std::uint64_t>(wu.hyper.seed);
    std::sort(trained.begin(), trained.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    auto left_out = trained;
    auto decoded = common::decode_delta(encoded).value().tensors;
    for (std::size_t t = 0; t < left_out.size(); ++t)
        for (std::size_t i = 0; i < left_out[t].values.size(); ++i) left_out[t].values[i] -= decoded[t].values[i];
    common::Commitments c;
    c.every = common::commitment_every(wu.hyper.local_steps);
    for (auto step : common::commitment_steps(wu.hyper.local_steps)) {
        auto part = trained;
        for (auto& t : part)
            for (auto& v : t.values) v *= static_cast<float>(step) / static_cast<float>(wu.hyper.local_steps);
        c.segments.push_back({step, 1.0, 0.0, common::commitment_sketch(part, seed)});
    }
    c.residual_out = common::residual_commitment(left_out, seed);
    return c;
}

double credit_of(TestServer& server, const std::string& client_id) {
    return server.store().client(client_id).value()->credit;
}

}  // namespace

TEST_CASE("a good result is accepted, credited and merged into a new version") {
    // int8 deltas and patches: the published model is then within int8 error of θ0 + η·Δ.
    TestServer server([](TaskConfig& c) {
        c.codec = {common::DeltaDType::Int8, 1.0};
        c.patches = common::DeltaEncoding{common::DeltaDType::Int8, 1.0};
    });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto delta = volunteer.made_up_delta(wu, 1e-3f);
    auto reply = volunteer.upload(wu, delta);
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    server.app().wait_idle();
    CHECK(state_of(server, wu.wu_id) == "merged");
    CHECK(server.version() == 1);
    CHECK(credit_of(server, volunteer.id()) == doctest::Approx(4 * 8 / 1000.0));
    auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{volunteer.id(), wu.wu_id}));
    auto status = common::parse_message<common::ResultStatus>(volunteer.post("/api/v1/result", ref).body).value();
    CHECK(status.state == "merged");
    CHECK(status.reason.empty());
    CHECK(status.credit == doctest::Approx(4 * 8 / 1000.0));
    // fedasync with poly staleness at τ = 0: θ1 = θ0 + η·Δ (up to the int8 quantisation of the
    // delta and of the patch that publishes θ1).
    double eta = server.config().merge.server_lr;
    auto before = volunteer.base_model(wu);
    auto wu2 = volunteer.request_work().value();
    CHECK(wu2.base_version == 1);
    auto after = volunteer.base_model(wu2);
    REQUIRE(after.size() == before.size());
    double worst = 0;
    for (std::size_t i = 0; i < after.size(); ++i)
        for (std::size_t j = 0; j < after[i].values.size(); ++j)
            worst =
                std::max(worst, std::abs(double(after[i].values[j]) - before[i].values[j] - eta * delta[i].values[j]));
    CHECK(worst < 1e-4);  // int8 absmax error is at most scale/254 per block, twice
    CHECK(worst > 0);     // and the model did move
}

TEST_CASE("undecodable, misshapen and all-zero deltas are rejected with their reasons") {
    TestServer server;
    TestVolunteer volunteer(server);

    SUBCASE("undecodable") {
        auto wu = volunteer.request_work().value();
        common::Bytes garbage(1000, 0x5a);
        REQUIRE(volunteer.upload_bytes(volunteer.manifest_for(wu, garbage), garbage).status == 200);
        server.app().wait_idle();
        CHECK(rejection_of(server, wu.wu_id) == reason::kUndecodable);
        auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{volunteer.id(), wu.wu_id}));
        auto status = common::parse_message<common::ResultStatus>(volunteer.post("/api/v1/result", ref).body).value();
        CHECK(status.state == "rejected");
        CHECK(status.reason == reason::kUndecodable);
        CHECK(status.credit == 0);
    }
    SUBCASE("shape mismatch") {
        auto wu = volunteer.request_work().value();
        auto delta = volunteer.made_up_delta(wu, 1e-3f);
        delta.pop_back();
        REQUIRE(volunteer.upload(wu, delta).status == 200);
        server.app().wait_idle();
        CHECK(rejection_of(server, wu.wu_id) == reason::kShapeMismatch);
    }
    SUBCASE("all zeros") {
        auto wu = volunteer.request_work().value();
        auto delta = volunteer.made_up_delta(wu, 0.0f);
        REQUIRE(volunteer.upload(wu, delta).status == 200);
        server.app().wait_idle();
        CHECK(rejection_of(server, wu.wu_id) == reason::kEmptyDelta);
    }
    CHECK(credit_of(server, volunteer.id()) == 0);
    CHECK(server.version() == 0);
}

TEST_CASE("a non-finite f32 delta is rejected as non_finite") {
    TestServer server([](TaskConfig& c) { c.codec.dtype = common::DeltaDType::F32; });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    auto delta = volunteer.made_up_delta(wu, 1e-3f);
    auto bytes = common::encode_delta(delta, wu.encoding).value().bytes;
    auto file = common::parse_safetensors(bytes).value();
    auto offset = file.tensors().front().data.data() - bytes.data();
    const float nan = std::nanf("");
    std::memcpy(bytes.data() + offset, &nan, sizeof nan);
    REQUIRE(volunteer.upload_bytes(volunteer.manifest_for(wu, bytes), bytes).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, wu.wu_id) == reason::kNonFinite);
}

TEST_CASE("a task with audits refuses a result without commitments at its upload; a task without takes it") {
    TestServer audited([](TaskConfig& c) { c.audit = 0.02; });
    TestVolunteer volunteer(audited);
    auto wu = volunteer.request_work().value();
    auto reply = volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f));
    CHECK(reply.status == 422);
    CHECK(reply.body.find("commitments_missing") != std::string::npos);
    CHECK(rejection_of(audited, wu.wu_id) == reason::kCommitmentsMissing);
    CHECK(audited.version() == 0);

    TestServer unaudited;  // the fixture's tasks draw no audits
    TestVolunteer other(unaudited);
    auto plain = other.request_work().value();
    CHECK(other.upload(plain, other.made_up_delta(plain, 1e-3f)).status == 200);
    unaudited.app().wait_idle();
    CHECK(rejection_of(unaudited, plain.wu_id).empty());
}

TEST_CASE("forged or misnumbered commitments are refused as commitment_mismatch, before any other check") {
    // (An honest unit's commitments, with its real opening loss: tests/client/test_result_commitments.cpp.)
    TestServer server([](TaskConfig& c) { c.max_in_flight = 10; });
    TestVolunteer volunteer(server);
    auto send = [&](const common::WorkUnit& wu, const common::NamedTensors& delta, const common::Commitments& c) {
        auto encoded = common::encode_delta(delta, wu.encoding).value().bytes;
        auto manifest = volunteer.manifest_for(wu, encoded);
        manifest.commitments = c;
        REQUIRE(volunteer.upload_bytes(manifest, encoded).status == 200);
        server.app().wait_idle();
    };
    // Commitments to one training sent with another delta.
    auto forged = volunteer.request_work().value();
    auto other = volunteer.made_up_delta(forged, 1e-3f, 77);
    send(forged, volunteer.made_up_delta(forged, 1e-3f),
         commitments_for(forged, other, common::encode_delta(other, forged.encoding).value().bytes));
    CHECK(rejection_of(server, forged.wu_id) == reason::kCommitmentMismatch);
    CHECK(refusal_of(server, forged.wu_id).find("sketch lies") != std::string::npos);

    // The delta's own commitments, but segments that are not the unit's.
    auto misnumbered = volunteer.request_work().value();
    auto mine = volunteer.made_up_delta(misnumbered, 1e-3f);
    auto c = commitments_for(misnumbered, mine, common::encode_delta(mine, misnumbered.encoding).value().bytes);
    c.every += 1;
    send(misnumbered, mine, c);
    CHECK(refusal_of(server, misnumbered.wu_id).find("commitment_mismatch: every") == 0);

    // Kept to its commitments, the same delta passes them and is judged by the opening loss
    // (made-up commitments report a made-up one).
    auto kept = volunteer.request_work().value();
    auto delta = volunteer.made_up_delta(kept, 1e-3f);
    send(kept, delta, commitments_for(kept, delta, common::encode_delta(delta, kept.encoding).value().bytes));
    CHECK(rejection_of(server, kept.wu_id) == reason::kOpeningLossMismatch);
    CHECK(credit_of(server, volunteer.id()) == 0);
    CHECK(server.version() == 0);
}

TEST_CASE("a delta far larger than recent accepted ones is rejected by the norm bound") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 10; });
    TestVolunteer volunteer(server);
    for (int i = 0; i < 5; ++i)
        submit(server, volunteer, volunteer.made_up_delta(volunteer.request_work().value(), 1e-3f, i + 1));
    CHECK(server.version() == 5);
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-1f)).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, wu.wu_id) == reason::kNormTooLarge);
    CHECK(server.version() == 5);
}

TEST_CASE("a delta that raises the held-out loss is rejected by the loss check") {
    TestServer server([](TaskConfig& c) {
        c.loss_check = 1.0;
        c.norm_bound = 1e9;  // the calibration would refuse this noise by its norm first
    });
    TestVolunteer volunteer(server);
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 0.5f)).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, wu.wu_id) == reason::kLossIncrease);
}

TEST_CASE(
    "replicas are compared: agreeing twins are accepted once; a disagreeing pair gets a third replica and the "
    "majority stands") {
    TestServer server([](TaskConfig& c) { c.replication = 1.0; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    auto wu_a = alice.request_work().value();
    auto wu_b = bob.request_work().value();
    CHECK(wu_a.hyper.seed == wu_b.hyper.seed);
    CHECK(wu_a.shards[0].sha256 == wu_b.shards[0].sha256);
    auto delta = alice.made_up_delta(wu_a, 1e-3f);
    auto decodes = server::result_deltas_decoded();
    REQUIRE(alice.upload(wu_a, delta).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, wu_a.wu_id) == "validated");  // waits for its twin
    REQUIRE(bob.upload(wu_b, delta).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, wu_a.wu_id) == "merged");
    CHECK(state_of(server, wu_b.wu_id) == "confirmed");
    // Each replica decoded once, by its checks: the comparison and the merge use what they kept.
    CHECK(server::result_deltas_decoded() - decodes == 2);
    CHECK(server.version() == 1);
    CHECK(credit_of(server, bob.id()) > 0);

    // A pair that disagrees is not refused: the unit asks for a third replica.
    auto next_a = alice.request_work().value();
    auto next_b = bob.request_work().value();
    REQUIRE(alice.upload(next_a, alice.made_up_delta(next_a, 1e-3f, 7)).status == 200);
    REQUIRE(bob.upload(next_b, bob.made_up_delta(next_b, 1e-3f, 8)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, next_a.wu_id) == "validated");
    CHECK(state_of(server, next_b.wu_id) == "validated");
    auto unit = server.store().assignment(next_a.wu_id).value()->work_unit_id;
    CHECK(server.store().work_unit(unit).value()->replicas == 3);
    // The tie-break goes to a third volunteer, and agrees with alice: she and carol stand.
    auto next_c = carol.request_work().value();
    CHECK(server.store().assignment(next_c.wu_id).value()->work_unit_id == unit);
    REQUIRE(carol.upload(next_c, carol.made_up_delta(next_c, 1e-3f, 7)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, next_a.wu_id) == "merged");
    CHECK(state_of(server, next_c.wu_id) == "confirmed");
    CHECK(rejection_of(server, next_b.wu_id) == reason::kReplicaMismatch);
    CHECK(server.store().work_unit(unit).value()->state == WorkUnitState::Done);
    CHECK(server.version() == 2);

    // Three results, no two agreeing: all refused (three failures retire the unit here).
    auto third_a = alice.request_work().value();
    auto third_b = bob.request_work().value();
    REQUIRE(alice.upload(third_a, alice.made_up_delta(third_a, 1e-3f, 21)).status == 200);
    REQUIRE(bob.upload(third_b, bob.made_up_delta(third_b, 1e-3f, 22)).status == 200);
    server.app().wait_idle();
    auto third_c = carol.request_work().value();
    REQUIRE(carol.upload(third_c, carol.made_up_delta(third_c, 1e-3f, 23)).status == 200);
    server.app().wait_idle();
    for (const auto& wu : {third_a, third_b, third_c}) CHECK(rejection_of(server, wu.wu_id) == reason::kReplicaMismatch);
    auto third_unit = server.store().work_unit(server.store().assignment(third_a.wu_id).value()->work_unit_id).value();
    CHECK(third_unit->state == WorkUnitState::Retired);
    CHECK(server.version() == 2);
}

TEST_CASE("a disagreeing pair whose tie-break never comes back is unresolved: neither merged nor counted against") {
    TestServer server([](TaskConfig& c) {
        c.replication = 1.0;
        c.quarantine_rejections = 2;
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto wu_a = alice.request_work().value();
    auto wu_b = bob.request_work().value();
    REQUIRE(alice.upload(wu_a, alice.made_up_delta(wu_a, 1e-3f, 7)).status == 200);
    REQUIRE(bob.upload(wu_b, bob.made_up_delta(wu_b, 1e-3f, 8)).status == 200);
    server.app().wait_idle();
    REQUIRE(state_of(server, wu_b.wu_id) == "validated");
    server.advance(server.config().deadline_s + 1);
    REQUIRE(server.app().transitioner().tick());
    CHECK(rejection_of(server, wu_a.wu_id) == reason::kReplicaUnresolved);
    CHECK(rejection_of(server, wu_b.wu_id) == reason::kReplicaUnresolved);
    CHECK(server.version() == 0);
    CHECK(server.store().rejections_since(alice.id(), 0).value() == 0);
    CHECK(!server.store().client(alice.id()).value()->quarantined);
}

TEST_CASE("replicated units settle concurrently: a unit whose delta reads slowly holds up no other unit") {
    FaultyFileSystem slow_disk;
    TestServer server([](TaskConfig& c) { c.replication = 1.0; }, PolicyKind::FedAsync,
                      [&slow_disk](ServerOptions& options) { options.file_system = &slow_disk; });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    TestVolunteer dave(server, "dave");
    auto x_a = alice.request_work().value();
    auto x_b = bob.request_work().value();
    auto y_c = carol.request_work().value();
    auto y_d = dave.request_work().value();
    auto unit_of = [&](const common::WorkUnit& wu) {
        return server.store().assignment(wu.wu_id).value()->work_unit_id;
    };
    REQUIRE(unit_of(x_a) == unit_of(x_b));
    REQUIRE(unit_of(y_c) == unit_of(y_d));
    REQUIRE(unit_of(x_a) != unit_of(y_c));
    auto delta_x = alice.made_up_delta(x_a, 1e-3f);
    auto delta_y = carol.made_up_delta(y_c, 1e-3f);
    REQUIRE(alice.upload(x_a, delta_x).status == 200);
    REQUIRE(carol.upload(y_c, delta_y).status == 200);
    server.app().wait_idle();
    REQUIRE(state_of(server, x_a.wu_id) == "validated");  // each waits for its twin
    REQUIRE(state_of(server, y_c.wu_id) == "validated");

    // Settling x reads bob's delta (alice's decoded form was kept by her checks), which the disk
    // holds back: x waits, and y settles meanwhile.
    slow_disk.hold_reads([&](const std::filesystem::path& path) { return path.stem() == x_b.wu_id; });
    REQUIRE(bob.upload(x_b, delta_x).status == 200);
    REQUIRE(wait_for([&] { return slow_disk.held_reads() == 1; }, std::chrono::seconds(60)));
    REQUIRE(dave.upload(y_d, delta_y).status == 200);
    auto settled = [&](const common::WorkUnit& wu) {
        auto state = state_of(server, wu.wu_id);
        return state == "merged" || state == "confirmed";
    };
    CHECK(wait_for([&] { return settled(y_c) && settled(y_d); }, std::chrono::seconds(60)));
    CHECK(state_of(server, x_b.wu_id) == "returned");
    slow_disk.release_reads();
    server.app().wait_idle();
    CHECK(settled(x_a));
    CHECK(settled(x_b));
}

TEST_CASE("int4 replicas that differ by their error-feedback residuals agree; noise against an honest twin does "
          "not") {
    TestServer server([](TaskConfig& c) {
        c.replication = 1.0;
        c.codec = {common::DeltaDType::Int4, 1.0};
        c.norm_bound = 1e9;  // made-up deltas with residuals: not at the calibration unit's scale
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    // The honest delta plus the residual an earlier, larger unit of this volunteer left out.
    auto carrying = [](TestVolunteer& v, const common::WorkUnit& wu, std::uint32_t earlier_seed) {
        auto delta = v.made_up_delta(wu, 1e-3f);
        auto earlier = common::encode_delta(v.made_up_delta(wu, 2e-3f, earlier_seed), wu.encoding).value().residual;
        for (std::size_t t = 0; t < delta.size(); ++t)
            for (std::size_t i = 0; i < delta[t].values.size(); ++i) delta[t].values[i] += earlier[t].values[i];
        return delta;
    };
    auto wu_a = alice.request_work().value();
    auto wu_b = bob.request_work().value();
    REQUIRE(alice.upload(wu_a, carrying(alice, wu_a, 11)).status == 200);
    REQUIRE(bob.upload(wu_b, carrying(bob, wu_b, 12)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, wu_a.wu_id) == "merged");
    CHECK(state_of(server, wu_b.wu_id) == "confirmed");
    // They agreed only through the allowance: farther apart than the tolerance alone allows.
    auto events = server.store().events_after(0, 10000).value();
    std::optional<boost::json::object> compared;
    for (const auto& e : events)
        if (e.kind == "replicas_compared") compared = boost::json::parse(e.detail_json).as_object();
    REQUIRE(compared.has_value());
    double distance = compared->at("relative_l2").to_number<double>();
    double allowance = compared->at("allowance").to_number<double>();
    CHECK(distance > server.config().replica_tolerance);
    CHECK(distance <= server.config().replica_tolerance + allowance);
    CHECK(allowance < 0.5);

    // Noise at the honest norm (an independent draw) against an honest twin.
    auto next_a = alice.request_work().value();
    auto next_b = bob.request_work().value();
    REQUIRE(alice.upload(next_a, carrying(alice, next_a, 13)).status == 200);
    REQUIRE(bob.upload(next_b, bob.made_up_delta(next_b, 1e-3f, 99)).status == 200);
    server.app().wait_idle();
    CHECK(state_of(server, next_a.wu_id) == "validated");  // a tie-break decides
    CHECK(state_of(server, next_b.wu_id) == "validated");
    bool distance_reported = false;
    for (const auto& e : server.store().events_after(0, 10000).value())
        if (e.kind == "replicas_compared") {
            auto detail = boost::json::parse(e.detail_json).as_object();
            auto ids = detail.at("assignments").as_array();
            if (ids.at(0).as_string() != next_a.wu_id && ids.at(1).as_string() != next_a.wu_id) continue;
            distance_reported = true;
            CHECK(detail.at("relative_l2").to_number<double>() >
                  server.config().replica_tolerance + detail.at("allowance").to_number<double>());
        }
    CHECK(distance_reported);
}

TEST_CASE("cheap checks at upload: deadline, base version, encoding, size and hash") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 10; });
    TestVolunteer volunteer(server);

    SUBCASE("deadline passed") {
        auto wu = volunteer.request_work().value();
        server.advance(server.config().deadline_s + 1);
        auto reply = volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f));
        CHECK(reply.status == 422);
        CHECK(rejection_of(server, wu.wu_id) == reason::kDeadlinePassed);
    }
    SUBCASE("wrong base version") {
        auto wu = volunteer.request_work().value();
        auto encoded = common::encode_delta(volunteer.made_up_delta(wu, 1e-3f), wu.encoding).value().bytes;
        auto manifest = volunteer.manifest_for(wu, encoded);
        manifest.base_version = 7;
        CHECK(volunteer.upload_bytes(manifest, encoded).status == 422);
        CHECK(rejection_of(server, wu.wu_id) == reason::kWrongBaseVersion);
    }
    SUBCASE("encoding mismatch") {
        auto wu = volunteer.request_work().value();
        wu.encoding.dtype = common::DeltaDType::BF16;
        CHECK(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f)).status == 422);
        CHECK(rejection_of(server, wu.wu_id) == reason::kEncodingMismatch);
    }
    SUBCASE("too large") {
        auto wu = volunteer.request_work().value();
        std::int64_t values = 0;
        for (const auto& t : volunteer.base_model(wu)) values += static_cast<std::int64_t>(t.values.size());
        common::Bytes huge(static_cast<std::size_t>(2 * 4 * values + (1 << 20) + 1), 0);
        auto reply = volunteer.upload_bytes(volunteer.manifest_for(wu, huge), huge);
        CHECK_MESSAGE(reply.status == 422, reply.body);
        CHECK(rejection_of(server, wu.wu_id) == reason::kTooLarge);
    }
    SUBCASE("hash mismatch") {
        auto wu = volunteer.request_work().value();
        auto encoded = common::encode_delta(volunteer.made_up_delta(wu, 1e-3f), wu.encoding).value().bytes;
        auto manifest = volunteer.manifest_for(wu, encoded);
        encoded[encoded.size() / 2] ^= 1;
        CHECK(volunteer.upload_bytes(manifest, encoded).status == 422);
        CHECK(rejection_of(server, wu.wu_id) == reason::kHashMismatch);
    }
    CHECK(server.store().client(volunteer.id()).value()->rejected == 1);
    CHECK(credit_of(server, volunteer.id()) == 0);
}

TEST_CASE("a result for a retired work unit is rejected") {
    TestServer server([](TaskConfig& c) {
        c.max_failures = 1;
        c.replication = 1.0;
    });
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    auto wu_a = alice.request_work().value();
    auto wu_b = bob.request_work().value();
    // Bob's replica fails (abandoned): with max_failures 1 the unit is retired.
    auto abandon =
        bob.post("/api/v1/abandon", boost::json::serialize(common::to_json(common::WorkUnitRef{bob.id(), wu_b.wu_id})));
    REQUIRE(abandon.status == 200);
    REQUIRE(alice.upload(wu_a, alice.made_up_delta(wu_a, 1e-3f)).status == 200);
    server.app().wait_idle();
    CHECK(rejection_of(server, wu_a.wu_id) == reason::kWorkUnitRetired);
}
