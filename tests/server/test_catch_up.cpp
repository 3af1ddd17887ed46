// Catch-up patches (catch_up_patches.h): one patch per unit from the model a volunteer holds to
// its own reconstruction of the unit's model, which the unit names and the blob route serves;
// what a sparse patch leaves out is sent by the next (error feedback per volunteer); states are
// bounded, the least recently served dropped and its files removed after the deadline; the
// checks read a result's base as the reconstruction; a volunteer the server keeps nothing
// for, and replicated units, get the published chain.
#include <doctest/doctest.h>

#include <cmath>

#include "blob_store.h"
#include "checkpoint.h"
#include "model_cache.h"
#include "model_patch.h"
#include "server_fixture.h"
#include "sha256.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// Sparse patches (5 % of each tensor, int2) for up to two volunteers.
void sparse_catch_up(TaskConfig& c) {
    c.patches = common::DeltaEncoding{common::DeltaDType::Int2, 0.05};
    c.catch_up_states = 2;
    c.max_in_flight = 100;
}

// Alice uploads `count` results, each merged into a new version.
void merge_results(TestServer& server, TestVolunteer& alice, int count) {
    static std::uint32_t seed = 1;
    for (int i = 0; i < count; ++i) {
        auto wu = alice.request_work().value();
        REQUIRE(alice.upload(wu, alice.made_up_delta(wu, 1e-2f, seed++)).status == 200);
        server.app().wait_idle();
    }
}

std::string blob(TestServer& server, const std::string& sha256) {
    auto reply = http_get(server.port(), "/blobs/" + sha256);
    return reply.status == 200 ? reply.body : std::string();
}

double distance(const common::NamedTensors& a, const common::NamedTensors& b) {
    double sum = 0;
    for (std::size_t t = 0; t < a.size(); ++t)
        for (std::size_t i = 0; i < a[t].values.size(); ++i) {
            double d = a[t].values[i] - b[t].values[i];
            sum += d * d;
        }
    return std::sqrt(sum);
}

// What a volunteer does with the unit: its held model plus the one patch, written as the server
// writes checkpoints; the hash must be the unit's model.
common::NamedTensors rebuild(TestServer& server, const std::string& held, const common::WorkUnit& wu) {
    auto model = common::read_checkpoint(common::as_bytes(blob(server, held))).value();
    REQUIRE(wu.patches.size() == 1);
    REQUIRE(common::apply_patch(model, common::as_bytes(blob(server, wu.patches[0].sha256))).ok());
    auto bytes = common::write_checkpoint(model, {wu.task_id, wu.model, wu.base_version}).value();
    CHECK(common::sha256_hex(bytes) == wu.model_blob.sha256);
    CHECK(blob(server, wu.model_blob.sha256) == std::string(bytes.begin(), bytes.end()));
    return model;
}

}  // namespace

TEST_CASE("a catch-up patch takes the held model to the volunteer's own reconstruction, and the next closes the gap") {
    TestServer server(sparse_catch_up);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    merge_results(server, alice, 3);
    auto versions = server.store().versions(server.config().task_id).value();
    REQUIRE(versions.size() == 4);
    auto published = common::read_checkpoint(common::as_bytes(blob(server, versions[3].blob_sha256))).value();

    // Bob holds version 0: one patch (not the chain of three), to a model of his own.
    auto first = bob.request_work(versions[0].blob_sha256).value();
    CHECK(first.base_version == 3);
    CHECK(first.patch_from == versions[0].blob_sha256);
    CHECK(first.model_blob.sha256 != versions[3].blob_sha256);  // 5 % of each tensor: not all of it
    auto reconstruction = rebuild(server, versions[0].blob_sha256, first);
    auto original = common::read_checkpoint(common::as_bytes(blob(server, versions[0].blob_sha256))).value();
    auto gap = distance(reconstruction, published);
    CHECK(gap < distance(original, published));

    // The checks judge his result against the model he trained from: the reconstruction.
    BlobStore blobs(server.state().blobs());
    PublishedModels published_models(server.store(), server.store(), blobs);
    ModelCache cache(published_models);
    CHECK(distance(*cache.unit_base(first).value(), reconstruction) == 0);

    // Asking again from his reconstruction, on the same version: what was left out comes now.
    std::string held = first.model_blob.sha256;
    for (int i = 0; i < 3; ++i) {
        auto next = bob.request_work(held).value();
        CHECK(next.patch_from == held);
        auto closer = rebuild(server, held, next);
        auto next_gap = distance(closer, published);
        CHECK(next_gap < gap);
        gap = next_gap;
        held = next.model_blob.sha256;
    }

    // A model the server never sent Bob: nothing to patch, the published model whole.
    auto unknown = bob.request_work(std::string(64, '0')).value();
    CHECK(unknown.patches.empty());
    CHECK(unknown.model_blob.sha256 == versions[3].blob_sha256);
    CHECK(distance(*cache.unit_base(unknown).value(), published) == 0);
}

TEST_CASE("catch-up states are bounded: the least recently served volunteer falls back, its files go later") {
    TestServer server(sparse_catch_up);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    TestVolunteer dave(server, "dave");
    merge_results(server, alice, 2);
    auto versions = server.store().versions(server.config().task_id).value();
    auto v0 = versions[0].blob_sha256;
    auto bobs = bob.request_work(v0).value();
    auto carols = carol.request_work(v0).value();
    // Holding the same model on the same version, Bob and Carol get the same reconstruction.
    CHECK(bobs.model_blob.sha256 == carols.model_blob.sha256);
    merge_results(server, alice, 1);
    auto bob_again = bob.request_work(bobs.model_blob.sha256).value();
    CHECK(bob_again.patch_from == bobs.model_blob.sha256);
    // Dave is the third: Carol, served least recently, is dropped.
    auto daves = dave.request_work(v0).value();
    CHECK(daves.patches.size() == 1);
    auto carol_again = carol.request_work(carols.model_blob.sha256).value();
    CHECK(carol_again.patches.empty());
    CHECK(carol_again.model_blob.sha256 == server.store().versions(server.config().task_id).value()[3].blob_sha256);

    // Her old reconstruction is Bob's old one too, which he no longer holds: kept until the
    // deadline has passed (a unit already sent may still be downloading it), then removed at the
    // next catch-up; what a kept state names stays.
    CHECK_FALSE(blob(server, carols.model_blob.sha256).empty());
    server.advance(server.config().deadline_s + 1);
    auto dave_again = dave.request_work(daves.model_blob.sha256).value();
    CHECK(dave_again.patches.size() == 1);
    CHECK(blob(server, carols.model_blob.sha256).empty());
    // A result on a retired reconstruction is checked against the published model instead.
    BlobStore blobs(server.state().blobs());
    PublishedModels published_models(server.store(), server.store(), blobs);
    ModelCache cache(published_models);
    auto published_v2 = common::read_checkpoint(common::as_bytes(blob(server, versions[2].blob_sha256))).value();
    CHECK(distance(*cache.unit_base(carols).value(), published_v2) == 0);
    CHECK_FALSE(blob(server, bob_again.model_blob.sha256).empty());
    CHECK_FALSE(blob(server, dave_again.model_blob.sha256).empty());
    for (const auto& v : server.store().versions(server.config().task_id).value())
        if (v.checkpoint) CHECK_FALSE(blob(server, v.blob_sha256).empty());
}

TEST_CASE("replicated units and tasks without catch-up get the published patch chain") {
    SUBCASE("replicated") {
        TestServer server([](TaskConfig& c) {
            sparse_catch_up(c);
            c.replication = 1;
        });
        TestVolunteer alice(server, "alice");
        // Alone, Alice's units are not replicated (no twin to send them to).
        merge_results(server, alice, 2);
        TestVolunteer bob(server, "bob");
        auto versions = server.store().versions(server.config().task_id).value();
        auto wu = bob.request_work(versions[0].blob_sha256).value();
        CHECK(wu.model_blob.sha256 == versions[2].blob_sha256);
        REQUIRE(wu.patches.size() == 2);
        CHECK(wu.patches[0].sha256 == *versions[1].patch_sha256);
    }
    SUBCASE("catch-up off") {
        TestServer server([](TaskConfig& c) { c.max_in_flight = 100; });
        CHECK(server.config().catch_up_states == 0);
        TestVolunteer alice(server, "alice");
        merge_results(server, alice, 2);
        auto versions = server.store().versions(server.config().task_id).value();
        auto wu = alice.request_work(versions[0].blob_sha256).value();
        CHECK(wu.model_blob.sha256 == versions[2].blob_sha256);
        CHECK(wu.patches.size() == 2);
    }
}

TEST_CASE(
    "a volunteer naming a reconstruction not its own, or its own after a restart, gets the published model whole") {
    TestServer server(sparse_catch_up);
    TestVolunteer alice(server, "alice");
    TestVolunteer bob(server, "bob");
    TestVolunteer carol(server, "carol");
    merge_results(server, alice, 2);
    auto versions = server.store().versions(server.config().task_id).value();
    auto bobs = bob.request_work(versions[0].blob_sha256).value();
    REQUIRE(bobs.patches.size() == 1);
    CHECK(bobs.model_blob.sha256 != versions[2].blob_sha256);

    // Carol claims to hold Bob's reconstruction: the server made it for Bob alone, so she gets no
    // patch from it, only the published model.
    auto carols = carol.request_work(bobs.model_blob.sha256).value();
    CHECK(carols.patches.empty());
    CHECK(carols.model_blob.sha256 == versions[2].blob_sha256);

    // States live in memory: after a restart Bob's own reconstruction is unknown as well.
    server.stop();
    server.start();
    auto after = bob.request_work(bobs.model_blob.sha256).value();
    CHECK(after.patches.empty());
    CHECK(after.model_blob.sha256 == versions[2].blob_sha256);
    // From the published model he then holds, catch-up starts again.
    merge_results(server, alice, 1);
    auto again = bob.request_work(versions[2].blob_sha256).value();
    CHECK(again.patches.size() == 1);
    CHECK(again.patch_from == versions[2].blob_sha256);
}
