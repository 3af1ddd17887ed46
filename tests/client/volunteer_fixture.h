// What the volunteer-loop tests share: a unit to train by hand, the options of a quiet CPU
// volunteer, polling, the real client on a thread of its own and its API calls.
#pragma once

#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "blob_store.h"
#include "server_api.h"
#include "server_fixture.h"
#include "volunteer.h"

namespace tessera::testing {

// A unit of the server's task, with its model and shards where the server keeps them.
struct UnitToTrain {
    common::WorkUnit wu;
    std::filesystem::path model;
    std::vector<std::filesystem::path> shards;
};

inline UnitToTrain unit_to_train(TestServer& server) {
    TestVolunteer asking(server);
    UnitToTrain unit{asking.request_work().value(), {}, {}};
    server::BlobStore blobs(server.state().blobs());
    unit.model = blobs.path_of(unit.wu.model_blob.sha256);
    for (const auto& shard : unit.wu.shards) unit.shards.push_back(blobs.path_of(shard.sha256));
    return unit;
}

inline client::VolunteerOptions options_for(std::uint16_t port, const std::filesystem::path& state) {
    client::VolunteerOptions options;
    options.server = "http://127.0.0.1:" + std::to_string(port);
    options.state_dir = state;
    options.device = "cpu";
    options.threads = 1;
    options.quiet = true;
    options.retry = {std::chrono::milliseconds(20), std::chrono::milliseconds(100)};
    return options;
}

// Polls `done` every 10 ms; false if it never held within `limit`.
template <class Condition>
bool eventually(Condition done, std::chrono::seconds limit = std::chrono::seconds(120)) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

// The real client signs with the wall clock: the server's manual clock starts there.
inline void set_to_wall_clock(TestServer& server) { server.advance(client::unix_now() - server.now()); }

// run_volunteer on its own thread; leaving the scope abandons whatever it does and joins it.
class VolunteerThread {
public:
    explicit VolunteerThread(const client::VolunteerOptions& options, bool paused = false)
        : options_(options), thread_([this, paused] {
              control_.paused = paused;
              stop_ = client::run_volunteer(options_, control_);
          }) {}
    ~VolunteerThread() {
        control_.abandon_now = true;
        if (thread_.joinable()) thread_.join();
    }
    client::VolunteerControl& control() { return control_; }
    client::Stop join() {
        thread_.join();
        return stop_;
    }

private:
    client::VolunteerOptions options_;
    client::VolunteerControl control_;
    client::Stop stop_;
    std::thread thread_;
};

// The reference client's API calls to `server` as `volunteer` (its key and id) makes them.
inline client::ServerApi api_of(const TestVolunteer& volunteer, TestServer& server, const client::HttpClient& http) {
    auto url = client::parse_url("http://127.0.0.1:" + std::to_string(server.port())).value();
    client::ServerApi api(url, http, volunteer.key());
    api.set_client_id(volunteer.id());
    return api;
}

inline std::vector<AssignmentRecord> in_progress(TestServer& server) {
    return server.store().in_state(AssignmentState::InProgress).value();
}

}  // namespace tessera::testing
