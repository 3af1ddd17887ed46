// A client attached to several servers: the turn table's rule (least work for its share goes
// first; a server not waiting is passed over; saved-up turns capped), the --server/--share
// lists, and two real servers sharing one client by its shares, or one taking all the work
// when the other cannot be reached.
#include <doctest/doctest.h>

#include <optional>
#include <thread>

#include "file_io.h"
#include "free_port.h"
#include "polling.h"
#include "server_fixture.h"
#include "server_api.h"
#include "several_servers.h"
#include "turn_table.h"

using namespace tessera;
using namespace tessera::testing;
using client::TurnTable;

namespace {

// take() on its own thread, so that several can wait at once.
class Taker {
public:
    Taker(TurnTable& table, std::size_t index)
        : thread_([&table, index, this] { got_ = table.take(index, [this] { return give_up_.load(); }); }) {}
    ~Taker() {
        give_up_ = true;
        if (thread_.joinable()) thread_.join();
    }
    bool join() {
        thread_.join();
        return got_;
    }
    void give_up() { give_up_ = true; }

private:
    std::atomic<bool> give_up_{false};
    bool got_ = false;
    std::thread thread_;
};

// The index that ends up holding the turn when `contenders` all wait for it while `holder`
// holds it and then ends its turn.
std::size_t winner(TurnTable& table, std::size_t holder, std::vector<std::size_t> contenders) {
    REQUIRE(table.take(holder, {}));
    std::vector<std::unique_ptr<Taker>> takers;
    for (auto index : contenders) takers.push_back(std::make_unique<Taker>(table, index));
    REQUIRE(wait_for([&] { return table.waiting() == contenders.size(); }, std::chrono::seconds(10)));
    table.end(holder, std::chrono::seconds(0));
    REQUIRE(wait_for([&] { return table.waiting() == contenders.size() - 1; }, std::chrono::seconds(10)));
    std::optional<std::size_t> won;
    for (std::size_t i = 0; i < contenders.size(); ++i) takers[i]->give_up();
    for (std::size_t i = 0; i < contenders.size(); ++i)
        if (takers[i]->join()) {
            CHECK_FALSE(won);  // one turn, one taker
            won = contenders[i];
        }
    REQUIRE(won);
    table.end(*won, std::chrono::seconds(0));
    return *won;
}

}  // namespace

TEST_CASE("the turn goes to the waiting server that worked least for its share") {
    TurnTable table({3, 1, 1});  // 2 is only ever the holder that hands the turn on
    CHECK(winner(table, 2, {0, 1}) == 0);  // a tie: the first
    table.end(0, std::chrono::seconds(3));  // 1 s per share
    CHECK(winner(table, 2, {0, 1}) == 1);   // 0 s per share
    table.end(1, std::chrono::seconds(2));  // 2 s per share
    CHECK(winner(table, 2, {0, 1}) == 0);
    table.end(0, std::chrono::seconds(3));  // 2 s per share
    CHECK(winner(table, 2, {1, 0}) == 0);   // a tie again: the lower index, whoever asked first
    CHECK(winner(table, 2, {1}) == 1);      // alone, it goes whatever it worked
    auto worked = table.worked_seconds();
    CHECK(worked[0] == doctest::Approx(6));
    CHECK(worked[1] == doctest::Approx(2));
}

TEST_CASE("a server that sat out saves up at most the cap, and a stop request ends a wait") {
    TurnTable table({1, 1}, std::chrono::seconds(10));
    REQUIRE(table.take(0, {}));
    table.end(0, std::chrono::seconds(100));
    REQUIRE(table.take(1, {}));  // it sat out 100 s: it may catch up 10
    CHECK(table.worked_seconds()[1] == doctest::Approx(90));
    TurnTable large({100, 100}, std::chrono::seconds(10));  // the cap is in seconds, whatever the shares' scale
    REQUIRE(large.take(0, {}));
    large.end(0, std::chrono::seconds(100));
    REQUIRE(large.take(1, {}));
    CHECK(large.worked_seconds()[1] == doctest::Approx(90));
    large.end(1, std::chrono::seconds(0));
    std::atomic<bool> stop{false};  // 1 holds the turn: 0 waits, until it gives up
    std::thread asking([&] { CHECK_FALSE(table.take(0, [&] { return stop.load(); })); });
    REQUIRE(wait_for([&] { return table.waiting() == 1; }, std::chrono::seconds(10)));
    stop = true;
    asking.join();
    CHECK(table.waiting() == 0);
    CHECK_THROWS(TurnTable({1, 0}));
}

TEST_CASE("--server and --share: one share per server, above 0, no server twice") {
    auto two = client::servers_with_shares("http://a:1,  https://b:2 ", "3, 1").value();
    REQUIRE(two.size() == 2);
    CHECK(two[1].url == "https://b:2");
    CHECK(two[0].share == 3);
    CHECK(client::servers_with_shares("http://a:1", "").value()[0].share == 1);
    CHECK(client::servers_with_shares("http://a:1,http://b:2", "1").message().find("one per server") !=
          std::string::npos);
    CHECK(client::servers_with_shares("http://a:1,http://a:1/", "").message().find("twice") != std::string::npos);
    CHECK(client::servers_with_shares("http://a:1,https://a:1", "").message().find("twice") !=
          std::string::npos);  // one state directory per host and port
    CHECK(client::servers_with_shares("http://a:1", "0").message().find("above 0") != std::string::npos);
    CHECK(client::servers_with_shares("http://a:1", "3x").message().find("not a number") != std::string::npos);
    CHECK(client::servers_with_shares("ftp://a", "").message().find("ftp://a") != std::string::npos);
    CHECK(client::servers_with_shares("", "").message().find("--server") != std::string::npos);
    CHECK(client::server_state_dir("/s", "https://tessera.example.org:8443/x") ==
          std::filesystem::path("/s/servers/tessera.example.org-8443"));
}

namespace {

client::VolunteerOptions base_options(const std::filesystem::path& state) {
    client::VolunteerOptions options;
    options.state_dir = state;
    options.device = "cpu";
    options.threads = 1;
    options.quiet = true;
    options.json_logs = std::getenv("DEBUG_LOGS") != nullptr;
    options.retry = {std::chrono::milliseconds(20), std::chrono::milliseconds(100)};
    return options;
}

std::string url_of(TestServer& server) { return "http://127.0.0.1:" + std::to_string(server.port()); }

double worked(client::VolunteerControl& control, std::size_t server) {
    return control.servers[server].to_json().at("worked_s").to_number<double>();
}

std::int64_t units_done(client::VolunteerControl& control, std::size_t server) {
    return control.servers[server].to_json().at("units_done").as_int64();
}

// run_volunteers on its own thread, with a board per server made before it starts.
class SharingClient {
public:
    SharingClient(const std::filesystem::path& state, std::vector<client::ServerShare> servers) {
        for (std::size_t i = 0; i < servers.size(); ++i) control.servers.emplace_back();
        thread_ = std::thread([this, state, servers] { stop_ = client::run_volunteers(base_options(state), servers, control); });
    }
    ~SharingClient() {
        control.abandon_now = true;
        if (thread_.joinable()) thread_.join();
    }
    // Asks every loop to stop after its unit; how the client ended.
    client::Stop stop() {
        control.stop_after_unit = true;
        thread_.join();
        return stop_;
    }
    client::VolunteerControl control;

private:
    client::Stop stop_;
    std::thread thread_;
};

}  // namespace

TEST_CASE("two real servers share one client by its shares, each with its own key and state") {
    auto longer_units = [](TaskConfig& config) { config.local_steps = 30; };  // the time in training, not overheads
    TestServer first(longer_units), second(longer_units);
    first.advance(client::unix_now() - first.now());
    second.advance(client::unix_now() - second.now());
    TempDir dir;
    SharingClient sharing(dir / "state", {{url_of(first), 3}, {url_of(second), 1}});
    auto& control = sharing.control;
    REQUIRE(wait_for([&] { return worked(control, 0) + worked(control, 1) >= 24; }, std::chrono::seconds(300)));
    auto stop = sharing.stop();
    INFO(stop.message);
    CHECK(stop.reason == client::StopReason::Requested);
    auto a = worked(control, 0), b = worked(control, 1);
    MESSAGE("turns took " << a << " s and " << b << " s; units " << units_done(control, 0) << " and "
                          << units_done(control, 1));
    CHECK(units_done(control, 1) >= 2);  // the smaller share works too
    CHECK(a / b >= 2.0);  // 3:1 in time, give or take a turn on either side
    CHECK(a / b <= 4.5);
    auto keys = [&](TestServer& server) {
        return client::server_state_dir(dir / "state", url_of(server)) / "client_key.pem";
    };
    REQUIRE(std::filesystem::exists(keys(first)));
    REQUIRE(std::filesystem::exists(keys(second)));
    CHECK(common::read_file(keys(first), 1 << 16).value() != common::read_file(keys(second), 1 << 16).value());
    CHECK(first.store().clients().value().size() == 1);
    CHECK(second.store().clients().value().size() == 1);
    CHECK(control.servers[1].to_json().at("server").as_string() == url_of(second));
}

TEST_CASE("a server that goes away mid-run gives up its turn: the other gets every turn after") {
    TestServer first, second;
    first.advance(client::unix_now() - first.now());
    second.advance(client::unix_now() - second.now());
    TempDir dir;
    SharingClient sharing(dir / "state", {{url_of(first), 1}, {url_of(second), 1}});
    auto& control = sharing.control;
    REQUIRE(wait_for([&] { return units_done(control, 1) >= 2; }, std::chrono::seconds(300)));
    second.stop();  // its loop now retries in the background
    auto before = units_done(control, 0);
    REQUIRE(wait_for([&] { return units_done(control, 0) >= before + 6; }, std::chrono::seconds(300)));
    CHECK(sharing.stop().reason == client::StopReason::Requested);
}

TEST_CASE("a server out of reach is passed over: the other gets every turn") {
    TestServer reachable;
    reachable.advance(client::unix_now() - reachable.now());
    auto nowhere = "http://127.0.0.1:" + std::to_string(free_port());
    TempDir dir;
    SharingClient sharing(dir / "state", {{nowhere, 1}, {url_of(reachable), 1}});
    auto& control = sharing.control;
    REQUIRE(wait_for([&] { return units_done(control, 1) >= 4; }, std::chrono::seconds(300)));
    CHECK(sharing.stop().reason == client::StopReason::Requested);
    CHECK(units_done(control, 0) == 0);
}
