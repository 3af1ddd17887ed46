// The checkpoint cadence with downlink patches: between checkpoints a version stores its patch
// only and the merged results' files are kept; a restart without a checkpoint at stop (as after
// kill -9) merges them again to the very model a server that checkpoints every version has; a
// published model is rebuilt from the patches when first asked for, and a damaged patch gives
// a clear error instead of a wrong model. Retention deletes the files of old versions but
// never what a live unit or a pinned (exported) version needs. The EMA of the versions comes
// back from the replay as it was.
#include <doctest/doctest.h>

#include "checkpoint.h"
#include "file_io.h"
#include "model_ema.h"
#include "server_fixture.h"
#include "sha256.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr int kResults = 5;
constexpr double kEmaDecay = 0.9;

struct Cadence {
    std::int64_t every = 3;
    bool at_stop = true;
    std::int64_t keep = 3;  // checkpoints retention keeps; 0: all
};

std::unique_ptr<TestServer> server_with(Cadence& cadence) {
    return std::make_unique<TestServer>(
        [](TaskConfig& c) {
            c.max_in_flight = 100;
            c.ema_decay = kEmaDecay;
        },
        PolicyKind::FedAsync,
                                        [&cadence](ServerOptions& options) {
                                            options.checkpoint_every = cadence.every;
                                            options.checkpoint_at_stop = cadence.at_stop;
                                            options.keep_checkpoints = cadence.keep;
                                        });
}

void deliver(TestServer& server, TestVolunteer& volunteer, int i) {
    auto wu = volunteer.request_work().value();
    REQUIRE(volunteer.upload(wu, volunteer.made_up_delta(wu, 1e-3f, static_cast<std::uint32_t>(i + 1))).status == 200);
    server.app().wait_idle();
}

VersionRecord version_of(TestServer& server, std::int64_t v) {
    return server.store().version(server.config().task_id, v).value().value();
}

std::size_t result_files(const TestServer& server) {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(server.state().results())) ++n;
    return n;
}

}  // namespace

TEST_CASE("between checkpoints only patches are written, and a restart replays the results merged since") {
    Cadence every_version{1, true};
    auto clean = server_with(every_version);
    TestVolunteer clean_volunteer(*clean);
    for (int i = 0; i < kResults; ++i) deliver(*clean, clean_volunteer, i);
    auto clean_v5 = version_of(*clean, kResults);
    REQUIRE(clean_v5.state_sha256.has_value());

    Cadence cadence{3, false};
    auto server = server_with(cadence);
    TestVolunteer volunteer(*server);
    for (int i = 0; i < kResults; ++i) deliver(*server, volunteer, i);
    for (std::int64_t v = 1; v <= kResults; ++v) {
        auto record = version_of(*server, v);
        CAPTURE(v);
        CHECK(record.checkpoint == (v == 3));
        CHECK(record.patch_sha256.has_value());
        CHECK(record.state_sha256.has_value() == (v == 3));
        CHECK(record.blob_sha256 == version_of(*clean, v).blob_sha256);  // the same published models
    }
    // Version 5's published model exists as its hash and patch until something asks for it.
    CHECK(!std::filesystem::exists(server->state().blobs() / version_of(*server, 5).blob_sha256));
    CHECK(result_files(*server) == 2);  // the log since version 3: the results of versions 4 and 5

    server->stop();  // no checkpoint at stop: the state kill -9 leaves
    CHECK(!Store::open(server->state().database(), false)
               .value()
               ->version(server->config().task_id, 5)
               .value()
               ->checkpoint);
    cadence.at_stop = true;
    server->start();  // version 3's checkpoint, then the results of versions 4 and 5 again
    CHECK(server->version() == kResults);
    server->stop();  // now version 5 is a checkpoint
    server->start();
    auto v5 = version_of(*server, kResults);
    CHECK(v5.checkpoint);
    REQUIRE(v5.state_sha256.has_value());
    CHECK(*v5.state_sha256 == *clean_v5.state_sha256);  // bit for bit
    REQUIRE(v5.optimizer_sha256.has_value());
    REQUIRE(clean_v5.optimizer_sha256.has_value());
    CHECK(*v5.optimizer_sha256 == *clean_v5.optimizer_sha256);  // the EMA too
    CHECK(result_files(*server) == 0);
    deliver(*server, volunteer, kResults);  // and merging goes on from there
    CHECK(server->version() == kResults + 1);
}

TEST_CASE("a published model between checkpoints is rebuilt from the patches when first asked for") {
    Cadence cadence{10, true};
    auto server = server_with(cadence);
    TestVolunteer volunteer(*server);
    for (int i = 0; i < 3; ++i) deliver(*server, volunteer, i);
    auto blobs = server->state().blobs();
    auto v3 = version_of(*server, 3);
    REQUIRE(!std::filesystem::exists(blobs / v3.blob_sha256));  // versions 1 and 2 were units' bases

    // A volunteer that holds no model gets a unit on version 3 and its file, written now.
    auto wu = volunteer.request_work().value();
    CHECK(wu.base_version == 3);
    CHECK(wu.patches.empty());
    REQUIRE(std::filesystem::exists(blobs / v3.blob_sha256));
    CHECK(common::sha256_hex(common::read_file(blobs / v3.blob_sha256, 1 << 30).value()) == v3.blob_sha256);

    // Rebuilt models are a cache: removed, they are rebuilt when next asked for.
    auto v1 = version_of(*server, 1);
    auto v2 = version_of(*server, 2);
    std::filesystem::remove(blobs / v1.blob_sha256);
    std::filesystem::remove(blobs / v2.blob_sha256);
    // Over HTTP (a volunteer whose patching failed downloads the model whole).
    auto reply = http_get(server->port(), "/blobs/" + v2.blob_sha256);
    REQUIRE(reply.status == 200);
    CHECK(common::sha256_hex(common::as_bytes(reply.body)) == v2.blob_sha256);

    // A damaged patch gives an error naming the version, never a wrong model.
    auto patch_path = blobs / *v1.patch_sha256;
    auto patch = common::read_file(patch_path, 1 << 30).value();
    patch[patch.size() / 2] ^= 0x5a;
    std::filesystem::permissions(patch_path, std::filesystem::perms::owner_write, std::filesystem::perm_options::add);
    REQUIRE(common::write_file_atomic(patch_path, patch));
    auto damaged = http_get(server->port(), "/blobs/" + v1.blob_sha256);
    CHECK(damaged.status == 500);
    CHECK(damaged.body.find("the published model of version 1") != std::string::npos);
    CHECK(!std::filesystem::exists(blobs / v1.blob_sha256));
    CHECK(http_get(server->port(), "/blobs/" + std::string(64, 'a')).status == 404);  // no such model
}

TEST_CASE("retention keeps the newest checkpoints, pinned ones and what live units need") {
    auto server = std::make_unique<TestServer>([](TaskConfig& c) { c.max_in_flight = 100; }, PolicyKind::FedAsync,
                                               [](ServerOptions& options) {
                                                   options.checkpoint_every = 2;
                                                   options.keep_checkpoints = 2;
                                               });
    const auto& task_id = server->config().task_id;
    auto blobs = server->state().blobs();
    TestVolunteer slow(*server, "slow");
    TestVolunteer fast(*server, "fast");
    auto held = slow.request_work().value();  // a live unit on version 0
    REQUIRE(held.base_version == 0);
    for (int i = 0; i < 8; ++i) deliver(*server, fast, i);
    REQUIRE(server->version() == 8);
    // Checkpoints at 2, 4, 6, 8; the live unit's base needs version 0's: nothing is retired.
    CHECK(std::filesystem::exists(blobs / version_of(*server, 0).blob_sha256));
    CHECK(std::filesystem::exists(blobs / *version_of(*server, 1).patch_sha256));

    REQUIRE(server->store().set_pinned(task_id, 4, true).value());
    CHECK(!server->store().set_pinned(task_id, 5, true).value());  // not a checkpoint
    auto retired_model = version_of(*server, 3).blob_sha256;
    REQUIRE(http_get(server->port(), "/blobs/" + retired_model).status == 200);  // built and stored
    auto before = state_usage(server->state()).blobs;
    REQUIRE(slow.upload(held, slow.made_up_delta(held, 1e-3f, 99)).status == 200);  // version 9
    server->app().wait_idle();
    deliver(*server, fast, 8);  // version 10, a checkpoint: versions before 8 are retired
    REQUIRE(server->version() == 10);

    for (std::int64_t v = 0; v < 8; ++v) {
        CAPTURE(v);
        auto record = version_of(*server, v);
        CHECK(record.checkpoint == (v == 4));
        CHECK(record.patch_sha256.has_value() == (v == 4));  // a pinned version keeps all its files
        CHECK(record.state_sha256.has_value() == (v == 4));
    }
    CHECK(!std::filesystem::exists(blobs / version_of(*server, 0).blob_sha256));
    CHECK(!std::filesystem::exists(blobs / retired_model));
    auto pinned = version_of(*server, 4);
    CHECK(pinned.pinned);
    CHECK(std::filesystem::exists(blobs / *pinned.state_sha256));
    CHECK(std::filesystem::exists(blobs / pinned.blob_sha256));
    for (std::int64_t v : {8, 10}) CHECK(std::filesystem::exists(blobs / *version_of(*server, v).state_sha256));
    CHECK(version_of(*server, 9).patch_sha256.has_value());
    CHECK(state_usage(server->state()).blobs < before);
    CHECK(http_get(server->port(), "/blobs/" + retired_model).status == 404);  // nothing left to build it from
    deliver(*server, fast, 9);                                                 // merging goes on
    CHECK(server->version() == 11);
}

TEST_CASE("the EMA saved at a checkpoint is the average of the versions' models") {
    Cadence every_version{1, true, 0};  // every version's model kept, to average by hand
    auto server = server_with(every_version);
    TestVolunteer volunteer(*server);
    for (int i = 0; i < kResults; ++i) deliver(*server, volunteer, i);
    auto read = [&](const std::string& sha256) {
        return common::read_checkpoint(common::read_file(server->state().blobs() / sha256, 1 << 30).value()).value();
    };
    auto expected = read(version_of(*server, 0).blob_sha256);  // the EMA starts at version 0's model
    for (std::int64_t v = 1; v <= kResults; ++v) {
        auto record = version_of(*server, v);
        auto model = read(record.state_sha256.value_or(record.blob_sha256));
        REQUIRE(ema_update(expected, model, ema_decay_at(kEmaDecay, v)).ok());
    }
    auto last = version_of(*server, kResults);
    REQUIRE(last.optimizer_sha256.has_value());
    auto saved = split_saved_state(read(*last.optimizer_sha256));
    CHECK(saved.policy.empty());  // fedasync keeps no state of its own
    REQUIRE(saved.ema.size() == expected.size());
    double largest = 0, moved = 0;
    auto model = read(last.state_sha256.value_or(last.blob_sha256));
    for (std::size_t i = 0; i < expected.size(); ++i)
        for (std::size_t j = 0; j < expected[i].values.size(); ++j) {
            largest = std::max(largest, static_cast<double>(std::abs(saved.ema[i].values[j] - expected[i].values[j])));
            moved = std::max(moved, static_cast<double>(std::abs(saved.ema[i].values[j] - model[i].values[j])));
        }
    CHECK(largest < 1e-6);
    CHECK(moved > 1e-5);  // an average, not the newest model
}
