// The soak's parts, briefly, against an in-process server on loopback (scripts/soak runs them
// for real, with the faults): simulated volunteers with churn and a hostile share, slow and
// broken connections, and the check that every acknowledged result was merged once or refused
// — which must also catch an acknowledgement the server has no record of.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "raw_connections.h"
#include "server_app.h"
#include "soak_check.h"
#include "soak_fleet.h"
#include "store.h"
#include "synthetic_dataset.h"
#include "task_setup.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// A fedbuff task whose checks let made-up (random) deltas through, as scripts/soak creates.
void create_soak_task(const server::StateDir& state, const std::filesystem::path& data) {
    REQUIRE(server::initialize_state(state));
    auto store = server::Store::connect(state.database_url(), false).value();
    auto config = server::default_task_config(data, server::PolicyKind::FedBuff, "dit-tiny").value();
    config.merge.buffer_size = 4;
    config.codec = {common::DeltaDType::Int8, 0.05};
    config.replication = 0;
    config.loss_check = 0;
    config.audit = 0;  // made-up results carry no commitments
    config.trust_streak = 0;
    config.copy_similarity = 1;
    config.min_alignment = -1;
    config.norm_floor = 0;
    REQUIRE(server::create_task(state, *store, config));
}

}  // namespace

TEST_CASE("soak: every acknowledged result is merged once or refused, and misbehaving connections get nowhere") {
    testing::TempDir dir;
    testing::write_synthetic_dataset(dir / "data", 2);
    server::StateDir state(dir / "state");
    create_soak_task(state, dir / "data");

    server::ServerOptions options;
    options.state = state;
    options.http.port = 0;
    options.http.header_timeout = std::chrono::seconds(2);
    options.registrations_per_hour = 0;
    options.sample_renderer = [](const server::TaskConfig&) { return std::optional<server::SampleRendererFactory>(); };
    auto app = server::ServerApp::start(options).value();

    SoakLoadOptions load;
    load.servers = {"http://127.0.0.1:" + std::to_string(app->port())};
    load.volunteers = 60;
    load.connections = 4;
    load.minutes = 0.25;
    load.unit_seconds = 1;
    load.hostile_share = 0.2;
    load.churn_share = 0.2;
    SoakRecord record(dir / "acks.txt");
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    std::thread raw([&] { run_raw_connections(app->port(), 3, end, record); });
    REQUIRE(run_soak_fleet(load, record));
    raw.join();
    app->stop();

    auto tally = record.tally();
    INFO(tally);
    CHECK(record.acknowledged_count() > 0);
    CHECK(tally.find("ACCEPTED") == std::string::npos);
    CHECK(tally.find("STILL OPEN") == std::string::npos);
    CHECK(tally.find("slow headers: closed by the server within 40 s") != std::string::npos);
    CHECK(tally.find("unknown uploader: answered 4") != std::string::npos);
    CHECK(tally.find("forged upload: refused 401") != std::string::npos);

    std::ostringstream out;
    auto verdict = check_soak({state.database_url(), dir / "acks.txt", 30}, out).value();
    INFO(out.str());
    CHECK(verdict.passed());
    CHECK(verdict.acknowledged == record.acknowledged_count());
    CHECK(verdict.honest_merged > 0);
    CHECK(verdict.hostile_merged == 0);
    CHECK(verdict.merged_assignments == verdict.merged_in_versions);
    CHECK(out.str().find("soak check: PASSED") != std::string::npos);

    // The check can fail: an acknowledgement the server has no record of is a lost result, and
    // a malformed acks file is refused with its line.
    std::filesystem::copy_file(dir / "acks.txt", dir / "lost.txt");
    std::ofstream(dir / "lost.txt", std::ios::app) << "a-000000000000 c-000000000000 honest\n";
    std::ostringstream again;
    auto failed = check_soak({state.database_url(), dir / "lost.txt", 1}, again).value();
    CHECK(failed.lost == 1);
    CHECK_FALSE(failed.passed());
    CHECK(again.str().find("soak check: FAILED") != std::string::npos);

    std::ofstream(dir / "malformed.txt") << "half a line\n";
    auto refused = check_soak({state.database_url(), dir / "malformed.txt", 1}, again);
    REQUIRE_FALSE(refused);
    CHECK(refused.message().find("malformed line 'half a line'") != std::string::npos);
}
