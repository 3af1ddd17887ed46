// A deployment past one machine, for real: tessera-server processes on one PostgreSQL database
// (a private cluster) and one shared state directory, behind a real nginx upstream on
// loopback, with real tessera-client volunteers training through it. kill -9 of the process
// running the aggregator: another takes over within the lease, the version keeps climbing,
// and every result a volunteer had acknowledged is merged exactly once. Two tasks at once:
// one created while the servers run is served, each progresses with its own curve, and a
// finished task is no longer served.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <thread>

#include "nginx_process.h"
#include "polling.h"
#include "postgres_cluster.h"
#include "server_process.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

constexpr std::int64_t kLeaseS = 3;

// The pid in a lease holder's name (host:pid:random).
pid_t holder_pid(const std::string& holder) {
    auto first = holder.find(':');
    auto second = holder.find(':', first + 1);
    return static_cast<pid_t>(std::stol(holder.substr(first + 1, second - first - 1)));
}

std::string upstream_config(const std::vector<std::unique_ptr<ServerProcess>>& servers) {
    std::string config = "  upstream tessera {\n";
    for (const auto& server : servers)
        config += "    server 127.0.0.1:" + std::to_string(server->port()) + " max_fails=1 fail_timeout=60s;\n";
    return config + "  }\n";
}

// Starts `count` server processes on the prepared state, nginx in front of them, and
// `volunteers` real clients through nginx.
struct Deployment {
    std::vector<std::unique_ptr<ServerProcess>> servers;
    std::unique_ptr<NginxProcess> proxy;
    std::vector<std::unique_ptr<ChildProcess>> volunteers;

    Deployment(const PreparedState& prepared, int count, int volunteer_count);
    void stop_volunteers() {
        for (auto& volunteer : volunteers) volunteer->signal(SIGINT);
        for (auto& volunteer : volunteers) CHECK(volunteer->wait() == 0);
    }
};

constexpr const char* kProxy =
    "    client_max_body_size 0;\n"
    "    location / {\n"
    "      proxy_pass http://tessera;\n"
    "      proxy_http_version 1.1;\n"
    "      proxy_set_header Connection \"\";\n"
    "      proxy_next_upstream error timeout;\n"
    "      proxy_buffering off;\n"
    "    }";

}  // namespace

TEST_CASE("three processes behind nginx on PostgreSQL: kill -9 of the aggregator's process loses nothing") {
    PostgresCluster cluster;
    PreparedState prepared(
        [](TaskConfig& config) {
            config.deadline_s = 30;
            config.eval_interval_s = 1;
        },
        cluster.create_database("scale_out"));
    auto store = Store::connect(prepared.state().database_url(), false).value();
    auto task_id = store->current_task().value().value().id;
    auto lease_name = "aggregator:" + task_id;
    Deployment deployment(prepared, 3, 3);
    auto& servers = deployment.servers;

    auto version = [&] { return store->task(task_id).value().value().version; };
    auto leader = [&] {
        auto lease = store->lease(lease_name).value();
        return lease ? holder_pid(lease->holder) : pid_t{-1};
    };
    // Exactly one of the three runs the aggregator.
    REQUIRE(wait_for([&] { return version() >= 4; }, std::chrono::seconds(240)));
    auto first_leader = leader();
    auto running = std::find_if(servers.begin(), servers.end(),
                                [&](const auto& s) { return s->process().pid() == first_leader; });
    REQUIRE(running != servers.end());

    // kill -9 the aggregator's process in the middle of the run.
    auto before_kill = version();
    (*running)->process().signal(SIGKILL);
    CHECK((*running)->process().wait() == 128 + SIGKILL);
    auto killed_at = std::chrono::steady_clock::now();
    REQUIRE(wait_for([&] { return leader() != first_leader && leader() != -1; }, std::chrono::seconds(kLeaseS + 10)));
    auto took_over_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
    MESSAGE("another process took the aggregator over " << took_over_s << " s after the kill (lease " << kLeaseS
                                                         << " s)");
    CHECK(took_over_s <= kLeaseS + 3);
    auto second_leader = leader();
    CHECK(std::any_of(servers.begin(), servers.end(),
                      [&](const auto& s) { return s->process().pid() == second_leader; }));
    // The version keeps climbing under the new aggregator, fed through the two survivors.
    REQUIRE(wait_for([&] { return version() >= before_kill + 4; }, std::chrono::seconds(180)));

    // The volunteers finish their current units and stop; then everything acknowledged settles
    // (a result the killed process had acknowledged but not validated is validated again by
    // the survivors' transitioners after a minute).
    deployment.stop_volunteers();
    auto unsettled = [&] {
        auto counts = store->counts(0).value().assignments;
        return counts["returned"] + counts["validated"] + counts["accepted"];
    };
    CHECK(wait_for([&] { return unsettled() == 0; }, std::chrono::seconds(150)));

    // Every acknowledged result (it has a returned time) was merged once, confirmed or refused;
    // the merged ones appear exactly once in the versions' merge log, and the versions' counts
    // add up to them.
    auto final_version = version();
    auto log = store->merged_between(task_id, 0, final_version).value();
    std::set<std::string> logged;
    for (const auto& entry : log) CHECK_MESSAGE(logged.insert(entry.assignment_id).second, entry.assignment_id);
    std::int64_t counted = 0;
    for (const auto& v : store->versions(task_id).value()) counted += v.merged_results;
    CHECK(counted == static_cast<std::int64_t>(log.size()));
    auto merged = store->in_state(AssignmentState::Merged).value();
    CHECK(merged.size() == log.size());
    for (const auto& a : merged) CHECK(logged.count(a.id) == 1);
    auto counts = store->counts(0).value().assignments;
    CHECK(counts["merged"] >= final_version);
    // The new aggregator keeps the curve: the last version is evaluated once merging pauses.
    CHECK(wait_for([&] { return store->version(task_id, final_version).value()->validation_loss.has_value(); },
                   std::chrono::seconds(60)));
    // Both survivors serve the API from the shared database.
    for (const auto& server : servers) {
        if (server->process().pid() == -1) continue;  // the killed one
        auto reply = http_get(server->port(), "/api/v1/stats");
        REQUIRE(reply.status == 200);
        auto stats = boost::json::parse(reply.body);
        CHECK(stats.at("version").as_int64() == final_version);
        CHECK(stats.at("state_bytes").at("database").as_int64() > 0);  // PostgreSQL's own size
    }
    MESSAGE("versions: " << before_kill << " before the kill, " << final_version << " at the end; " << log.size()
                         << " results merged");
}

TEST_CASE("two tasks at once behind nginx on PostgreSQL: a task created while serving is served, a finished one is not") {
    PostgresCluster cluster;
    PreparedState prepared(
        [](TaskConfig& config) {
            config.task_id = "first";
            config.deadline_s = 30;
            config.eval_interval_s = 1;
        },
        cluster.create_database("two_tasks"));
    auto store = Store::connect(prepared.state().database_url(), false).value();
    Deployment deployment(prepared, 2, 2);
    auto version = [&](const std::string& id) { return store->task(id).value().value().version; };
    REQUIRE(wait_for([&] { return version("first") >= 2; }, std::chrono::seconds(120)));

    // A second task, created with the real command while the servers run (no restart).
    REQUIRE(server_command({"task", "create", "--data", (prepared.dir() / "data").string(), "--id", "second",
                            "--local-steps", "4", "--batch", "8", "--target-seconds", "0", "--replication", "0",
                            "--loss-check", "0", "--trust-streak", "0", "--min-alignment", "-1", "--eval-samples", "64",
                            "--eval-interval", "1", "--deadline", "30s"},
                           prepared) == 0);
    // Both progress, each through its own aggregator and with its own curve.
    auto first_then = version("first");
    REQUIRE(wait_for([&] { return version("second") >= 3 && version("first") >= first_then + 3; },
                     std::chrono::seconds(180)));
    for (const std::string id : {"first", "second"}) {
        CHECK(store->lease("aggregator:" + id).value().has_value());
        // Each task's curve: its evaluations run beside the merges and lag them on a loaded machine.
        CHECK(wait_for(
            [&] {
                auto versions = store->versions(id).value();
                return std::count_if(versions.begin(), versions.end(),
                                     [](const auto& v) { return v.version > 0 && v.validation_loss; }) >= 1;
            },
            std::chrono::seconds(60)));
        auto stats = http_get(deployment.servers[1]->port(), "/api/v1/tasks/" + id + "/stats");
        REQUIRE(stats.status == 200);
        CHECK(boost::json::parse(stats.body).at("task").at("id").as_string() == id);
    }
    auto listed = boost::json::parse(http_get(deployment.proxy->port(), "/api/v1/tasks").body).at("tasks").as_array();
    CHECK(listed.size() == 2);
    CHECK(http_get(deployment.proxy->port(), "/api/v1/tasks/absent/stats").status == 404);

    // Finishing the first: no new units of it; its results in flight settle, its aggregator
    // stops and lets go of the lease; the second goes on.
    REQUIRE(server_command({"task", "finish", "first"}, prepared) == 0);
    REQUIRE(wait_for([&] { return store->results_in_flight("first").value() == 0; }, std::chrono::seconds(90)));
    REQUIRE(wait_for([&] { return !store->lease("aggregator:first").value().has_value(); }, std::chrono::seconds(60)));
    auto units_of_first = [&] {
        std::int64_t units = 0;
        for (const auto& a : store->in_state(AssignmentState::Merged).value()) units += a.task_id == "first";
        return units + store->results_in_flight("first").value();
    };
    auto first_units = units_of_first();
    auto second_then = version("second");
    REQUIRE(wait_for([&] { return version("second") >= second_then + 3; }, std::chrono::seconds(120)));
    CHECK(units_of_first() == first_units);
    CHECK(store->results_in_flight("first").value() == 0);
    // The other task commands: a finished task cannot be resumed; weights and the list.
    CHECK(server_command({"task", "resume", "first"}, prepared) != 0);
    CHECK(store->task("first").value()->state == TaskState::Finished);
    CHECK(server_command({"task", "weight", "second", "3"}, prepared) == 0);
    CHECK(store->task("second").value()->weight == 3);
    CHECK(server_command({"task", "weight", "second"}, prepared) != 0);  // no weight given
    CHECK(server_command({"task", "list"}, prepared) == 0);
    CHECK(server_command({"status"}, prepared) == 0);
    CHECK(server_command({"task", "pause", "absent"}, prepared) != 0);
    // Bad settings are refused with nothing created or started.
    CHECK(server_command({"task", "create", "--data", (prepared.dir() / "data").string(), "--id", "third",
                          "--requires-device", "gpu"},
                         prepared) != 0);
    CHECK(server_command({"task", "create", "--data", (prepared.dir() / "data").string(), "--id", "third",
                          "--min-device-memory", "-1"},
                         prepared) != 0);
    CHECK(!store->task("third").value().has_value());
    CHECK_THROWS(ServerProcess(prepared.state(), {"--aggregator-lease", "1"}));
    deployment.stop_volunteers();
}

namespace {

Deployment::Deployment(const PreparedState& prepared, int count, int volunteer_count) {
    const char* nginx = std::getenv("TESSERA_NGINX");
    REQUIRE_MESSAGE(nginx != nullptr, "TESSERA_NGINX is not set (scripts/install-deps installs nginx-light)");
    for (int i = 0; i < count; ++i)
        servers.push_back(std::make_unique<ServerProcess>(
            prepared.state(), std::vector<std::string>{"--aggregator-lease", std::to_string(kLeaseS), "--tick", "1"}));
    proxy = std::make_unique<NginxProcess>(nginx, prepared.dir() / "nginx", kProxy, upstream_config(servers));
    for (int v = 0; v < volunteer_count; ++v)
        volunteers.push_back(std::make_unique<ChildProcess>(std::vector<std::string>{
            required_env("TESSERA_CLIENT"), "--server", "http://127.0.0.1:" + std::to_string(proxy->port()), "--state",
            (prepared.dir() / ("volunteer" + std::to_string(v))).string(), "--device", "cpu", "--threads", "1",
            "--name", "v" + std::to_string(v), "--quiet"}));
}

}  // namespace
