// Look-ahead (client/look_ahead.h): the real client fetches its next unit while one trains,
// trains it next while the last result uploads, and gives back a unit fetched ahead that it
// will not train.
#include <doctest/doctest.h>

#include <filesystem>

#include "client_state.h"
#include "volunteer.h"
#include "volunteer_fixture.h"

using namespace tessera;
using namespace tessera::testing;
using client::StopReason;

namespace {

// A volunteer that looks ahead from its second training step on (the lead outlasts any unit
// here), however short its transfers (on loopback they take no time beside training).
client::VolunteerOptions looking_ahead(std::uint16_t port, const std::filesystem::path& state) {
    auto options = options_for(port, state);
    options.look_ahead_lead = std::chrono::hours(1);
    options.look_ahead_share = 0;
    return options;
}

std::size_t count_in(TestServer& server, AssignmentState state) {
    return server.store().in_state(state).value().size();
}

std::size_t settled(TestServer& server) {
    return count_in(server, AssignmentState::Accepted) + count_in(server, AssignmentState::Merged) +
           count_in(server, AssignmentState::Rejected);
}

}  // namespace

TEST_CASE("a volunteer fetches its next unit while one trains, trains it next, and every result merges") {
    TestServer server([](TaskConfig& config) { config.local_steps = 100; });  // a second or so
    set_to_wall_clock(server);
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    VolunteerThread volunteer(looking_ahead(server.port(), state.root()));
    auto& control = volunteer.control();
    // Two units held at once: the one training and the one fetched ahead (max_in_flight 2),
    // kept in the state directory until it is taken.
    REQUIRE(eventually([&] { return in_progress(server).size() == 2 && state.load_next().value().has_value(); }));
    REQUIRE(eventually([&] {
        server.app().wait_idle();
        return settled(server) >= 3;
    }));
    control.stop_after_unit = true;
    auto stop = volunteer.join();
    INFO(stop.message);
    CHECK(stop.reason == StopReason::Requested);
    server.app().wait_idle();
    CHECK(count_in(server, AssignmentState::Rejected) == 0);
    CHECK(settled(server) == static_cast<std::size_t>(control.status.to_json().at("units_done").as_int64()));
    // The unit fetched ahead when the stop came was given back, not left to time out.
    CHECK(in_progress(server).empty());
    CHECK(count_in(server, AssignmentState::Abandoned) <= 1);
    CHECK(!std::filesystem::exists(state.root() / "next.json"));
    CHECK(!state.load_current().value().has_value());
}

TEST_CASE(
    "quit with a unit fetched ahead gives both units back; a unit fetched ahead by an earlier run is given back") {
    TestServer server([](TaskConfig& config) { config.local_steps = 400; });  // long enough to quit mid-unit
    set_to_wall_clock(server);
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    auto options = looking_ahead(server.port(), state.root());
    std::string left_behind;
    {
        VolunteerThread volunteer(options);
        REQUIRE(eventually([&] { return in_progress(server).size() == 2 && state.load_next().value().has_value(); }));
        left_behind = state.load_next().value()->wu_id;
        volunteer.control().abandon_now = true;
        auto stop = volunteer.join();
        CHECK(stop.reason == StopReason::Requested);
    }
    CHECK(in_progress(server).empty());
    CHECK(count_in(server, AssignmentState::Abandoned) == 2);
    CHECK(!state.load_next().value().has_value());

    // A run that ended without its cleanup (killed) leaves next.json: the next start gives that
    // unit back (here already given back: the server keeps it abandoned) and forgets it.
    REQUIRE(state.save_next({"{}", left_behind, "ahead"}));
    options.once = true;
    options.look_ahead_lead = {};
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    INFO(stop.message);
    CHECK(stop.reason == StopReason::OnceDone);
    CHECK(!state.load_next().value().has_value());
    CHECK(server.store().assignment(left_behind).value()->state == AssignmentState::Abandoned);
}

TEST_CASE("a result uploads while the next unit trains; quit mid-upload keeps it, and the next start uploads it") {
    TestServer server([](TaskConfig& config) { config.local_steps = 100; });
    set_to_wall_clock(server);
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    auto options = looking_ahead(server.port(), state.root());
    options.max_upload_mbps = 0.05;  // a result takes seconds to go up
    std::string uploading;
    {
        VolunteerThread volunteer(options);
        // The first result set aside and going up, while the next unit is the one in hand.
        REQUIRE(eventually([&] {
            auto aside = state.load_uploading();
            auto current = state.load_current();
            if (!aside.ok() || !current.ok() || !*aside || !*current) return false;
            uploading = (*aside)->wu_id;
            return (*current)->wu_id != uploading && (*current)->phase == "training";
        }));
        CHECK(std::filesystem::exists(state.uploading_delta_file()));
        volunteer.control().abandon_now = true;
        auto stop = volunteer.join();
        CHECK(stop.reason == StopReason::Requested);
    }
    // Its upload was cut: the result is kept, its unit still the volunteer's on the server.
    REQUIRE(state.load_uploading().value().has_value());
    CHECK(state.load_uploading().value()->wu_id == uploading);
    CHECK(std::filesystem::exists(state.uploading_delta_file()));
    CHECK(server.store().assignment(uploading).value()->state == AssignmentState::InProgress);

    options.once = true;
    options.max_upload_mbps = 0;
    client::VolunteerControl control;
    auto stop = client::run_volunteer(options, control);
    INFO(stop.message);
    CHECK(stop.reason == StopReason::OnceDone);
    CHECK(server.store().assignment(uploading).value()->returned_at.has_value());
    CHECK(!state.load_uploading().value().has_value());
    CHECK(!std::filesystem::exists(state.uploading_delta_file()));
}

TEST_CASE("with transfers far shorter than training (loopback), a volunteer does not look ahead") {
    TestServer server([](TaskConfig& config) { config.local_steps = 100; });
    set_to_wall_clock(server);
    TempDir dir;
    client::ClientState state(dir / "volunteer");
    auto options = options_for(server.port(), state.root());  // --look-ahead-share 0.1
    options.look_ahead_lead = std::chrono::hours(1);          // look-ahead on: the share alone decides
    VolunteerThread volunteer(options);
    std::size_t most_held = 0;
    bool fetched_ahead = false, set_aside = false;
    REQUIRE(eventually([&] {
        most_held = std::max(most_held, in_progress(server).size());
        fetched_ahead = fetched_ahead || std::filesystem::exists(state.root() / "next.json");
        set_aside = set_aside || std::filesystem::exists(state.root() / "uploading.json");
        server.app().wait_idle();
        return settled(server) >= 3;
    }));
    volunteer.control().stop_after_unit = true;
    CHECK(volunteer.join().reason == StopReason::Requested);
    CHECK(most_held == 1);
    CHECK_FALSE(fetched_ahead);
    CHECK_FALSE(set_aside);
}
