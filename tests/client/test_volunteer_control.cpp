// The volunteer's loop against a real in-process server, continued: a model built from
// patches (a corrupt one sends it to the whole model), an upload refused on its header, a
// manual pause, and a preference's wait (on battery).
#include <doctest/doctest.h>

#include <thread>

#include "blob_cache.h"
#include "client_state.h"
#include "file_io.h"
#include "machine_sensors.h"
#include "sha256.h"
#include "volunteer_fixture.h"

using namespace tessera;
using namespace tessera::testing;
using client::StopReason;

TEST_CASE(
    "a volunteer that holds an older model builds the next one from patches; a corrupt patch sends it to the "
    "whole model") {
    TestServer server;  // int2 patches at every version (the defaults)
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    client::VolunteerControl control;
    REQUIRE(client::run_volunteer(options, control).reason == StopReason::OnceDone);
    client::ClientState state(dir / "volunteer");
    auto held = state.load_remembered().value().model;
    REQUIRE(!held.empty());
    auto task_id = server.config().task_id;
    // Another volunteer moves the model on by two versions.
    TestVolunteer other(server, "other");
    std::uint32_t seed = 20;  // a new delta each time: a repeated one is refused as a copy
    auto move_on = [&] {
        server.app().wait_idle();  // the volunteer's own result merged first
        auto before = server.version();
        for (int i = 0; i < 2; ++i) {
            auto wu = other.request_work().value();
            REQUIRE(other.upload(wu, other.made_up_delta(wu, 1e-3f, seed++)).status == 200);
            server.app().wait_idle();
        }
        REQUIRE(server.version() == before + 2);
    };
    auto cached = [&](const std::string& sha256) { return std::filesystem::exists(state.cache_dir() / sha256); };
    move_on();

    // The current version's whole model is not on the server (between checkpoints only its
    // patch is written, and the unit offers patches): only the patches can make it.
    auto base = server.store().task(task_id).value().value().version;
    auto held_version = server.store().versions_of_blob(task_id, held).value().value().last;
    REQUIRE(held_version < base);
    auto chain = server.store().versions_between(task_id, held_version, base).value();
    REQUIRE(chain.size() == static_cast<std::size_t>(base - held_version));
    auto model = server.store().version(task_id, base).value().value().blob_sha256;
    REQUIRE(!std::filesystem::exists(server.state().blobs() / model));
    auto stop = client::run_volunteer(options, control);
    INFO(stop.message);
    REQUIRE(stop.reason == StopReason::OnceDone);
    for (const auto& v : chain) CHECK(cached(v.patch_sha256.value()));
    CHECK(cached(model));
    CHECK(state.load_remembered().value().model == model);

    // The model it holds got damaged on its disk: the patched model's hash differs from the
    // unit's, and the volunteer downloads the whole model instead.
    move_on();
    auto damaged = state.cache_dir() / model;
    auto bytes = common::read_file(damaged, 1 << 30).value();
    bytes[bytes.size() - 4] ^= 0x01;  // the lowest byte of the last f32 value
    REQUIRE(common::write_file_atomic(damaged, bytes).ok());
    base = server.store().task(task_id).value().value().version;
    auto newest = server.store().version(task_id, base).value().value();
    stop = client::run_volunteer(options, control);
    INFO(stop.message);
    REQUIRE(stop.reason == StopReason::OnceDone);
    CHECK(cached(newest.patch_sha256.value()));  // fetched, then found not to fit
    auto rebuilt = common::read_file(state.cache_dir() / newest.blob_sha256, 1 << 30).value();
    CHECK(common::sha256_hex(rebuilt) == newest.blob_sha256);  // the whole model, verified
}

TEST_CASE("an upload with nothing in progress is refused on its header: the body is never sent, the answer is final") {
    TestServer server;
    set_to_wall_clock(server);
    TestVolunteer volunteer(server);
    auto unit = volunteer.request_work().value();
    client::HttpClient http;
    auto api = api_of(volunteer, server, http);
    REQUIRE(api.abandon(unit.wu_id));  // the unit is gone: nothing of this volunteer's is in progress

    // A large body: sent at once into a connection the server closes, its write could fail
    // before the answer is read. Sent after 100 Continue, it is never sent.
    auto bytes_in = [&] {
        auto page = http_get(server.port(), "/metrics").body;
        constexpr std::string_view kName = "\ntessera_http_received_bytes_total ";
        auto at = page.find(kName);
        REQUIRE(at != std::string::npos);
        return std::stoull(page.substr(at + kName.size()));
    };
    auto before = bytes_in();
    std::string packed(3 << 19, '\x01');  // 1.5 MiB: within the dit-tiny task's upload limit
    auto uploaded = api.upload_result(packed);
    REQUIRE_FALSE(uploaded);
    CHECK(uploaded.error().kind == client::FailureKind::Refused);
    CHECK(uploaded.error().http_status == 409);
    CHECK(uploaded.error().message.find("no work unit in progress") != std::string::npos);
    CHECK(bytes_in() - before < (1 << 18));  // the header, not the body
}

TEST_CASE("paused, a volunteer asks for no work and waits between training steps; resumed, it finishes") {
    TestServer server;
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    VolunteerThread volunteer(options, true);
    auto& control = volunteer.control();
    auto phase = [&] { return std::string(control.status.to_json().at("phase").as_string()); };
    REQUIRE(eventually([&] { return phase() == "paused"; }, std::chrono::seconds(30)));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(in_progress(server).empty());  // registered, but no unit asked for

    control.paused = false;
    REQUIRE(eventually([&] { return !control.status.to_json().at("wu_id").as_string().empty(); },
                       std::chrono::seconds(30)));
    control.paused = true;  // before its first training step ends
    REQUIRE(eventually([&] { return phase() == "paused while training"; }, std::chrono::seconds(60)));
    auto step = control.status.to_json().at("step").as_int64();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    CHECK(control.status.to_json().at("step").as_int64() == step);
    CHECK(in_progress(server).size() == 1);  // the unit stays this volunteer's while it waits

    control.paused = false;
    auto stop = volunteer.join();
    INFO(stop.message);
    CHECK(stop.reason == StopReason::OnceDone);
    auto status = control.status.to_json();
    CHECK(status.at("units_done").as_int64() == 1);
    REQUIRE(status.at("last_results").as_array().size() == 1);
    CHECK(!status.at("last_results").as_array()[0].at("wu_id").as_string().empty());
    CHECK(status.at("wu_id").as_string().empty());
}

namespace {

// A battery the test plugs and unplugs.
class Battery : public client::MachineSensors {
public:
    client::MachineState read(const client::WorkPreferences&) override {
        client::MachineState state;
        state.on_battery = discharging;
        return state;
    }
    std::atomic<bool> discharging{true};
};

}  // namespace

TEST_CASE(
    "on battery a volunteer asks for no work; held while training past what its deadline allows, it gives "
    "the unit back; plugged in, it works") {
    TestServer server([](TaskConfig& config) {
        config.deadline_s = 10;   // the shortest allowed; the server's own clock never moves, so only the
        config.local_steps = 50;  // client's rule gives the unit back, while its training is still going on
    });
    set_to_wall_clock(server);
    TempDir dir;
    auto options = options_for(server.port(), dir / "volunteer");
    options.once = true;
    auto battery = std::make_shared<Battery>();
    options.sensors = battery;
    options.preference_interval = std::chrono::milliseconds(10);
    VolunteerThread volunteer(options);
    auto& control = volunteer.control();
    auto status = [&] { return control.status.to_json(); };
    auto text = [&](const char* key) { return std::string(status().at(key).as_string()); };
    REQUIRE(eventually([&] { return text("phase") == "waiting"; }, std::chrono::seconds(30)));
    CHECK(control.held);
    CHECK(text("waiting_because") == "on battery");
    CHECK(status().at("preferences").as_array().size() == 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    CHECK(in_progress(server).empty());  // registered, but no unit asked for

    battery->discharging = false;  // plugged in: it takes a unit ...
    REQUIRE(eventually([&] { return !text("wu_id").empty(); }, std::chrono::seconds(30)));
    auto first = text("wu_id");
    battery->discharging = true;  // ... and unplugged before its training ends, the wait outlasts the deadline
    REQUIRE(eventually([&] { return !server.store().in_state(AssignmentState::Abandoned).value().empty(); },
                       std::chrono::seconds(60)));
    CHECK(server.store().in_state(AssignmentState::Abandoned).value()[0].id == first);
    REQUIRE(eventually([&] { return text("phase") == "waiting"; }, std::chrono::seconds(30)));
    CHECK(text("wu_id").empty());
    CHECK(status().at("units_done").as_int64() == 0);

    battery->discharging = false;
    auto stop = volunteer.join();
    INFO(stop.message);
    CHECK(stop.reason == StopReason::OnceDone);
    CHECK(status().at("units_done").as_int64() == 1);
    CHECK(text("waiting_because").empty());
    CHECK_FALSE(control.held);
}
