// The local control socket of a running client: owner-only, one client per state directory,
// each command's effect on the loop's controls and its answer, the refusals (pause twice,
// resume when not paused, an unknown command) and a client that is not running.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <boost/json.hpp>

#include "local_control.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::testing;

namespace {

boost::json::object ask(const std::filesystem::path& state, const std::string& command) {
    auto answer = client::send_control_command(state, command);
    REQUIRE_MESSAGE(answer.ok(), (answer.ok() ? "" : answer.message()));
    return boost::json::parse(*answer).as_object();
}

}  // namespace

TEST_CASE("commands over the socket change the loop's controls and answer what they did") {
    TempDir dir;
    auto state = dir / "state";
    client::VolunteerControl control;
    auto local = client::LocalControl::open(state, control);
    REQUIRE_MESSAGE(local.ok(), (local.ok() ? "" : local.message()));
    struct stat socket_status {};
    REQUIRE(stat((state / "control.sock").c_str(), &socket_status) == 0);
    CHECK((socket_status.st_mode & 0777) == 0600);
    CHECK((std::filesystem::status(state).permissions() & std::filesystem::perms::others_all) ==
          std::filesystem::perms::none);

    control.status.set_identity("http://127.0.0.1:1", "c-1", "cpu");
    control.status.set_unit("a-1", 50);
    control.status.set_progress(7);
    control.status.add_transfers(1500, 300);
    control.status.add_transfers(200, 100);
    auto status = ask(state, "status");
    CHECK(status.at("ok").as_bool());
    CHECK(status.at("status").at("wu_id").as_string() == "a-1");
    CHECK(status.at("status").at("step").as_int64() == 7);
    auto text = client::describe_status(status);
    CHECK(text.find("step 7 of 50") != std::string::npos);
    CHECK(text.find("1700 bytes down, 400 bytes up") != std::string::npos);

    CHECK(ask(state, "pause").at("ok").as_bool());
    CHECK(control.paused);
    auto twice = ask(state, "pause");
    CHECK_FALSE(twice.at("ok").as_bool());
    CHECK(twice.at("message").as_string() == "already paused");
    CHECK(ask(state, "status").at("paused").as_bool());
    CHECK(client::describe_status(ask(state, "status")).find("paused") != std::string::npos);
    CHECK(ask(state, "resume").at("ok").as_bool());
    CHECK_FALSE(control.paused);
    CHECK_FALSE(ask(state, "resume").at("ok").as_bool());

    // A preference's wait is shown with its reason; `resume` does not override it.
    control.status.set_preferences({"not on battery", "only within 22:00-07:00"});
    control.status.set_waiting_because("on battery");
    control.held = true;
    CHECK(ask(state, "status").at("message").as_string() == "waiting");
    CHECK(ask(state, "status").at("held").as_bool());
    auto waiting = client::describe_status(ask(state, "status"));
    CHECK(waiting.find("waiting:  on battery (a preference)") != std::string::npos);
    CHECK(waiting.find("prefers:  not on battery; only within 22:00-07:00") != std::string::npos);
    CHECK(ask(state, "pause").at("ok").as_bool());
    auto resumed = ask(state, "resume");
    CHECK(resumed.at("ok").as_bool());
    CHECK(std::string(resumed.at("message").as_string()).find("still waiting") != std::string::npos);
    CHECK(control.held);
    control.held = false;
    control.status.set_waiting_because("");
    CHECK(client::describe_status(ask(state, "status")).find("waiting:") == std::string::npos);

    auto unknown = ask(state, "explode");
    CHECK_FALSE(unknown.at("ok").as_bool());
    CHECK(std::string(unknown.at("message").as_string()).find("status, pause, resume, finish or quit") !=
          std::string::npos);

    control.paused = true;
    CHECK(ask(state, "finish").at("ok").as_bool());
    CHECK(control.stop_after_unit);
    CHECK_FALSE(control.paused);  // finishing the unit means training it
    CHECK_FALSE(control.abandon_now);
    CHECK(ask(state, "quit").at("ok").as_bool());
    CHECK(control.abandon_now);
}

TEST_CASE("one client per state directory; no client, no answer") {
    TempDir dir;
    auto state = dir / "state";
    auto none = client::send_control_command(state, "status");
    REQUIRE_FALSE(none.ok());
    CHECK(none.message().find("no tessera-client is running") != std::string::npos);
    {
        client::VolunteerControl control, other_control;
        auto first = client::LocalControl::open(state, control);
        REQUIRE(first.ok());
        auto second = client::LocalControl::open(state, other_control);
        REQUIRE_FALSE(second.ok());
        CHECK(second.message().find("another tessera-client is running on") != std::string::npos);
        CHECK(second.message().find("pid " + std::to_string(getpid())) != std::string::npos);
    }
    // Gone with its client: the socket is removed and the lock released.
    CHECK_FALSE(std::filesystem::exists(state / "control.sock"));
    auto after = client::send_control_command(state, "status");
    CHECK_FALSE(after.ok());
    client::VolunteerControl control;
    CHECK(client::LocalControl::open(state, control).ok());
}
