// Units trained for real on the CPU against a test server (server_fixture.h), and uploaded with
// or without their commitments: the helpers of the tests that judge real training.
#pragma once

#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "blob_store.h"
#include "optimizer_moments.h"
#include "result_upload.h"
#include "server_fixture.h"
#include "training/work_runner.h"

namespace tessera::testing {

struct Trained {
    common::WorkUnit wu;
    client::RunOutput output;
};

// `wu` trained on the CPU as `run` says (1 thread unless told), as `trained_as` reads it (a
// subtly wrong client), from `model` when given (else the unit's own base).
inline Trained train(TestServer& server, const common::WorkUnit& wu, client::RunOptions run = {},
                     std::optional<std::filesystem::path> model = {}, std::optional<common::WorkUnit> trained_as = {}) {
    server::BlobStore blobs(server.state().blobs());
    std::vector<std::filesystem::path> shards;
    for (const auto& shard : wu.shards) shards.push_back(blobs.path_of(shard.sha256));
    run.device = "cpu";
    run.threads = run.threads > 0 ? run.threads : 1;
    auto output = client::run_work_unit(trained_as.value_or(wu), model.value_or(blobs.path_of(wu.model_blob.sha256)),
                                        shards, run);
    REQUIRE_MESSAGE(output, output.message());
    return {wu, std::move(*output)};
}

// `wu` trained at `factor` times its learning rate: a subtly wrong client whose commitments are
// true to what it trained and whose opening loss is the unit's (the rate acts from the first update).
inline Trained train_at_rate(TestServer& server, const common::WorkUnit& wu, double factor) {
    auto misread = wu;
    misread.hyper.lr *= factor;
    return train(server, wu, {}, {}, misread);
}

// A unit asked for by `volunteer` and trained on the CPU, from `model` when given.
inline Trained train_unit(TestServer& server, TestVolunteer& volunteer,
                          std::optional<std::filesystem::path> model = {}) {
    return train(server, volunteer.request_work().value(), {}, std::move(model));
}

// The count of a /metrics line, e.g. `tessera_checked_results_total{checks="audit"}`.
inline std::int64_t metric(TestServer& server, const std::string& line) {
    auto body = http_get(server.port(), "/metrics").body;
    auto at = body.find(line + " ");
    REQUIRE_MESSAGE(at != std::string::npos, line);
    return std::stoll(body.substr(at + line.size() + 1));
}

// Uploads the trained result with `commitments` (none: without) and waits for its verdict
// (none comes while the moments its answer asks for are awaited). True when they are asked for.
inline bool upload(TestServer& server, TestVolunteer& volunteer, const Trained& t,
                   std::optional<common::Commitments> commitments) {
    auto manifest = volunteer.manifest_for(t.wu, t.output.delta);
    manifest.device = t.output.device;
    manifest.commitments = std::move(commitments);
    auto reply = volunteer.upload_bytes(manifest, t.output.delta);
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    server.app().wait_idle();
    return boost::json::parse(reply.body).as_object().contains("moments_wanted");
}

// Posts `moments` as the moments `wu_id` started from (POST /api/v1/results/moments).
inline HttpReply send_moments(TestVolunteer& volunteer, const std::string& wu_id,
                              const client::KeptOptimizerState& moments) {
    auto file = common::write_optimizer_moments({moments.steps, moments.exp_avg, moments.exp_avg_sq}).value();
    auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{volunteer.id(), wu_id}));
    auto body = common::pack_result_upload(ref, file);
    return volunteer.post("/api/v1/results/moments", std::string(body.begin(), body.end()));
}

// The result's status as its volunteer reads it (POST /api/v1/result).
inline common::ResultStatus result_status(TestVolunteer& volunteer, const std::string& wu_id) {
    auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{volunteer.id(), wu_id}));
    auto reply = volunteer.post("/api/v1/result", ref);
    REQUIRE_MESSAGE(reply.status == 200, reply.body);
    return common::parse_message<common::ResultStatus>(reply.body).value();
}

// The details of the events of `kind`, oldest first.
inline std::vector<boost::json::object> events_of(TestServer& server, const std::string& kind) {
    std::vector<boost::json::object> found;
    for (const auto& e : server.store().events_after(0, 1000).value())
        if (e.kind == kind) found.push_back(boost::json::parse(e.detail_json).as_object());
    return found;
}

}  // namespace tessera::testing
