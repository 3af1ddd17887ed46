// The divergence guard in a running server (docs/operations.md, "When a task diverges"): a
// fedasync task with an absurd server learning rate blows its model up; the aggregator goes back
// to the best evaluated model at half the rate, at most DivergenceGuard::kMaxRecoveries times,
// then goes back once more and pauses the task, each time with an event and a log line; the cut
// rate survives a restart; an honest run never trips it. A refused diloco setting is in
// test_divergence_guard.cpp.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include "checkpoint.h"
#include "divergence_guard.h"
#include "file_io.h"
#include "model_ema.h"
#include "server_fixture.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

// The stored form's largest server_lr. With made-up deltas of kDivergingScale each merge adds
// noise of about 10 to every weight (1.25 at the last cut rate); honest ones are kDeltaScale.
constexpr double kAbsurdLr = 100;
constexpr float kDivergingScale = 0.1f;
constexpr float kDeltaScale = 1e-3f;
constexpr int kMaxDeliveries = 30;

std::unique_ptr<TestServer> server_at(double server_lr) {
    return std::make_unique<TestServer>(
        [server_lr](TaskConfig& c) {
            c.max_in_flight = 100;
            c.merge.server_lr = server_lr;
            c.merge.staleness = {};  // full weight: θ ← θ + η·Δ
            c.norm_bound = 1e9;      // the made-up deltas are not what is on trial here
        },
        PolicyKind::FedAsync, [](ServerOptions& options) { options.keep_checkpoints = 0; });  // version 0 kept
}

// One result merged and the versions it made evaluated and judged. False when the server gave
// no work (a paused task).
bool deliver(TestServer& server, TestVolunteer& volunteer, int i, float scale = kDeltaScale) {
    auto wu = volunteer.request_work();
    if (!wu) return false;
    REQUIRE(volunteer.upload(*wu, volunteer.made_up_delta(*wu, scale, static_cast<std::uint32_t>(i + 1))).status == 200);
    // A merge queues an evaluation, whose verdict may make a version that is evaluated in turn.
    for (int round = 0; round < 3; ++round) server.app().wait_idle();
    return true;
}

std::vector<boost::json::object> events_of(TestServer& server, const std::string& kind) {
    std::vector<boost::json::object> found;
    for (const auto& e : server.store().events_after(0, 100000).value())
        if (e.kind == kind) found.push_back(boost::json::parse(e.detail_json).as_object());
    return found;
}

common::NamedTensors model_of(TestServer& server, std::int64_t version) {
    auto record = server.store().version(server.config().task_id, version).value().value();
    auto bytes = common::read_file(server.state().blobs() / record.state_sha256.value_or(record.blob_sha256), 1 << 30);
    return common::read_checkpoint(bytes.value()).value();
}

bool same_values(const common::NamedTensors& a, const common::NamedTensors& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t t = 0; t < a.size(); ++t)
        if (a[t].values != b[t].values) return false;
    return true;
}

// Delivers until `kind` has been recorded `count` times; the deliveries it took.
int deliver_until(TestServer& server, TestVolunteer& volunteer, const std::string& kind, std::size_t count, int& i) {
    int delivered = 0;
    while (events_of(server, kind).size() < count && delivered < kMaxDeliveries)
        if (deliver(server, volunteer, i++, kDivergingScale)) ++delivered;
        else break;
    return delivered;
}

}  // namespace

TEST_CASE("a diverging task goes back to its best model at half the rate, then is paused") {
    auto server = server_at(kAbsurdLr);
    TestVolunteer volunteer(*server);
    int i = 0;
    deliver_until(*server, volunteer, "divergence_paused", 1, i);

    auto recovered = events_of(*server, "divergence_recovered");
    auto paused = events_of(*server, "divergence_paused");
    REQUIRE(recovered.size() == static_cast<std::size_t>(DivergenceGuard::kMaxRecoveries));
    REQUIRE(paused.size() == 1);
    double lr = kAbsurdLr;
    for (const auto& e : recovered) {
        lr *= DivergenceGuard::kLrCut;
        CHECK(e.at("server_lr").to_number<double>() == doctest::Approx(lr));
        CHECK(e.at("returned_to").to_number<std::int64_t>() == 0);  // noise never beat version 0
        const auto& loss = e.at("loss");
        CHECK((loss.is_null() || loss.to_number<double>() > DivergenceGuard::kFactor * e.at("best_loss").to_number<double>()));
    }
    // Past its recoveries the guard keeps the last rate, goes back once more and pauses.
    CHECK(paused[0].at("server_lr").to_number<double>() == doctest::Approx(lr));
    CHECK(paused[0].at("recoveries").to_number<std::int64_t>() == DivergenceGuard::kMaxRecoveries);

    // The current version holds version 0's model, the task is paused and gives no work.
    CHECK(same_values(model_of(*server, server->version()), model_of(*server, 0)));
    CHECK(server->store().task(server->config().task_id).value()->state == TaskState::Paused);
    CHECK_FALSE(volunteer.request_work().has_value());
    // The dashboard's overview says what happened.
    auto stats = boost::json::parse(http_get(server->port(), "/api/v1/stats").body).as_object();
    CHECK(stats.at("task").at("divergence").at("action").as_string() == "paused");
}

TEST_CASE("the return is a checkpoint that keeps the cut rate across a restart") {
    auto server = server_at(kAbsurdLr);
    TestVolunteer volunteer(*server);
    int i = 0;
    deliver_until(*server, volunteer, "divergence_recovered", 1, i);
    auto first = events_of(*server, "divergence_recovered");
    REQUIRE(first.size() == 1);
    const auto returned = first[0].at("version").to_number<std::int64_t>();
    auto record = server->store().version(server->config().task_id, returned).value().value();
    CHECK(record.checkpoint);
    CHECK(record.merged_results == 0);
    REQUIRE(record.optimizer_sha256.has_value());
    auto state = common::read_checkpoint(
        common::read_file(server->state().blobs() / *record.optimizer_sha256, 1 << 30).value());
    auto guard = DivergenceGuard::from_tensors(split_saved_state(state.value()).guard);
    REQUIRE(guard.ok());
    CHECK(guard->state().lr_scale == doctest::Approx(DivergenceGuard::kLrCut));
    CHECK(guard->state().recoveries == 1);

    server->stop();
    server->start();
    TestVolunteer again(*server, "after the restart");
    deliver_until(*server, again, "divergence_recovered", 2, i);
    auto both = events_of(*server, "divergence_recovered");
    REQUIRE(both.size() == 2);
    CHECK(both[1].at("recoveries").to_number<std::int64_t>() == 2);
    CHECK(both[1].at("server_lr").to_number<double>() ==
          doctest::Approx(kAbsurdLr * DivergenceGuard::kLrCut * DivergenceGuard::kLrCut));
}

TEST_CASE("an honest run never trips the guard") {
    auto server = server_at(1.0);
    TestVolunteer volunteer(*server);
    for (int i = 0; i < 8; ++i) REQUIRE(deliver(*server, volunteer, i));
    CHECK(server->version() == 8);
    CHECK(events_of(*server, "divergence_recovered").empty());
    CHECK(events_of(*server, "divergence_paused").empty());
    CHECK(server->store().task(server->config().task_id).value()->state == TaskState::Active);
    auto stats = boost::json::parse(http_get(server->port(), "/api/v1/stats").body).as_object();
    CHECK(stats.at("task").at("divergence").is_null());
}
