// A trained unit's commitments judged by a real in-process server (docs/protocol.md,
// "Commitments"): an honest CPU volunteer's result is merged, its opening loss recomputed by the
// server to the CPU tolerance; a forged opening loss and a unit trained from a stale base are
// refused as opening_loss_mismatch; a result without commitments skips the checks; a cnn task
// (dropout drawn from the unit's stream) reproduces its opening losses too.
#include <doctest/doctest.h>

#include "blob_store.h"
#include "rejection_reasons.h"
#include "server_fixture.h"
#include "training/work_runner.h"

using namespace tessera;
using namespace tessera::testing;
namespace reason = tessera::server::reason;

namespace {

struct Trained {
    common::WorkUnit wu;
    client::RunOutput output;
};

// A unit asked for by `volunteer` and trained on the CPU, from `model` when given (else the
// unit's own base).
Trained train_unit(TestServer& server, TestVolunteer& volunteer, std::optional<std::filesystem::path> model = {}) {
    auto wu = volunteer.request_work().value();
    server::BlobStore blobs(server.state().blobs());
    std::vector<std::filesystem::path> shards;
    for (const auto& shard : wu.shards) shards.push_back(blobs.path_of(shard.sha256));
    client::RunOptions run;
    run.device = "cpu";
    run.threads = 1;
    auto output = client::run_work_unit(wu, model.value_or(blobs.path_of(wu.model_blob.sha256)), shards, run);
    REQUIRE_MESSAGE(output, output.message());
    return {wu, std::move(*output)};
}

// Uploads the trained result with `commitments` (none: without) and waits for its verdict.
void upload(TestServer& server, TestVolunteer& volunteer, const Trained& t,
            std::optional<common::Commitments> commitments) {
    auto manifest = volunteer.manifest_for(t.wu, t.output.delta);
    manifest.device = t.output.device;
    manifest.commitments = std::move(commitments);
    auto reply = volunteer.upload_bytes(manifest, t.output.delta);
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    server.app().wait_idle();
}

}  // namespace

TEST_CASE("an honest unit's commitments pass; a forged opening loss and a stale base are refused") {
    TestServer server([](TaskConfig& c) { c.max_in_flight = 10; });
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
    CHECK(rejection_of(server, stale.wu.wu_id) == reason::kOpeningLossMismatch);

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
