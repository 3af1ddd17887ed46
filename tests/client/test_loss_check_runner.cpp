// A loss-check unit run by the client (client/training/loss_check_runner.h) on a real volunteer's
// uploaded result: its report holds the losses the server's own checks measure (the task's
// probe, on the same held-out rows and the unit's own rows), the trained delta lowers the loss
// on the unit's rows, and inputs it cannot use are named errors.
#include <doctest/doctest.h>

#include "checkpoint.h"
#include "delta_codec.h"
#include "file_io.h"
#include "loss_report.h"
#include "torch_model.h"
#include "trained_units.h"
#include "training/loss_check_runner.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

common::NamedTensors read_model(const std::filesystem::path& file) {
    auto bytes = common::read_file(file, common::kMaxModelBytes).value();
    return common::read_checkpoint(bytes).value();
}

// `base` + the delta in `framed` (a volunteer's upload), value by value.
common::NamedTensors plus_delta(common::NamedTensors base, const common::Bytes& framed) {
    auto delta = common::decode_delta(framed).value();
    REQUIRE(delta.tensors.size() == base.size());
    std::sort(base.begin(), base.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    for (std::size_t i = 0; i < base.size(); ++i) {
        REQUIRE(base[i].name == delta.tensors[i].name);
        for (std::size_t j = 0; j < base[i].values.size(); ++j) base[i].values[j] += delta.tensors[i].values[j];
    }
    return base;
}

double mean_of(const std::vector<double>& values) {
    double total = 0;
    for (double v : values) total += v;
    return total / static_cast<double>(values.size());
}

void check_close(const std::vector<double>& reported, const std::vector<double>& server) {
    REQUIRE(reported.size() == server.size());
    for (std::size_t i = 0; i < reported.size(); ++i) CHECK(reported[i] == doctest::Approx(server[i]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("a loss-check unit reports the losses the server's checks measure") {
    TestServer server;
    TestVolunteer alice(server, "alice");
    auto trained = train_unit(server, alice);
    TempDir dir;
    const auto result_file = dir.path() / "result.delta";
    REQUIRE(common::write_file_atomic(result_file, trained.output.delta));
    const auto held_out_file = std::filesystem::path(server.config().data_dir) / "validation.safetensors";

    server::BlobStore blobs(server.state().blobs());
    client::CheckInputs inputs{blobs.path_of(trained.wu.model_blob.sha256), {}, result_file, held_out_file};
    for (const auto& shard : trained.wu.shards) inputs.shards.push_back(blobs.path_of(shard.sha256));
    auto unit = trained.wu;
    const std::int64_t samples = 100;
    unit.check = common::LossCheck{{std::string(64, 'a'), 1}, {std::string(64, 'b'), 1}, samples};
    auto output = client::run_loss_check(unit, inputs, 1);
    REQUIRE_MESSAGE(output, output.message());
    auto report = common::parse_loss_report(std::string(output->report.begin(), output->report.end()));
    REQUIRE_MESSAGE(report, report.message());
    CHECK(report->held_out_before.size() == static_cast<std::size_t>(samples));  // of the shard's 128 rows
    CHECK(report->own_before.size() == 32);                                      // the unit's first epoch: 4 steps × 8
    CHECK(output->metrics.samples == 2 * (100 + 32));
    CHECK(output->device == "cpu");
    // The after-losses are the trained weights' (four warm-up steps move them too little for
    // their mean to fall surely; which way it goes is the loss checks' question, not this test's).
    CHECK(report->own_after != report->own_before);
    CHECK(report->held_out_after != report->held_out_before);
    CHECK(output->metrics.loss_end == doctest::Approx(mean_of(report->own_after)));

    // The server's probe, as its loss checks use it, on the same weights and rows.
    auto probe = server::make_torch_probe_factory(server.config(), held_out_file).value()().value();
    auto base = read_model(inputs.model);
    auto after = plus_delta(base, trained.output.delta);
    check_close(report->held_out_before, probe->check_losses(base, samples).value());
    check_close(report->held_out_after, probe->check_losses(after, samples).value());
    server::AssignedSamples assigned;
    for (const auto& shard : unit.shards) assigned.shards.push_back(shard.sha256);
    assigned.read_shard = [&](const std::string& sha256) { return common::read_file(blobs.path_of(sha256), 1 << 30); };
    assigned.seed = static_cast<std::uint64_t>(unit.hyper.seed);
    assigned.batch_size = unit.hyper.batch_size;
    assigned.steps = unit.hyper.local_steps;
    assigned.max_samples = samples;
    auto own = probe->losses_on_assigned({&base, &after}, assigned).value();
    check_close(report->own_before, own[0]);
    check_close(report->own_after, own[1]);
}

TEST_CASE("a loss-check unit's unusable inputs are named errors") {
    TestServer server;
    TestVolunteer alice(server, "alice");
    auto wu = alice.request_work().value();
    TempDir dir;
    server::BlobStore blobs(server.state().blobs());
    client::CheckInputs inputs{blobs.path_of(wu.model_blob.sha256),
                               {blobs.path_of(wu.shards.front().sha256)},
                               dir.path() / "result.delta",
                               std::filesystem::path(server.config().data_dir) / "validation.safetensors"};
    CHECK(client::run_loss_check(wu, inputs, 1).message() == "not a loss-check unit");
    wu.check = common::LossCheck{{std::string(64, 'a'), 1}, {std::string(64, 'b'), 1}, 16};
    REQUIRE(common::write_file_atomic(inputs.result, common::as_bytes("not a delta file")));
    auto garbage = client::run_loss_check(wu, inputs, 1);
    CHECK(garbage.message().find("the checked result") == 0);
    // Another model's delta: a cnn's parameters are not a dit-tiny's.
    common::NamedTensors other{{"conv.weight", {2, 2}, {0.1f, 0.2f, 0.3f, 0.4f}}};
    auto encoded = common::encode_delta(other, {common::DeltaDType::F32, 1.0}).value().bytes;
    REQUIRE(common::write_file_atomic(inputs.result, encoded));
    auto misfit = client::run_loss_check(wu, inputs, 1);
    CHECK(misfit.message().find("the checked result: the delta has") == 0);
}
