// tessera-server started as a real process on a free loopback port (integration tests).
#pragma once

#include <cstdlib>

#include "child_process.h"
#include "clock.h"
#include "polling.h"
#include "server_fixture.h"

namespace tessera::testing {

inline std::int64_t wall_clock() { return server::system_clock()(); }

// A prepared state directory (synthetic dataset, one task) that processes can serve; its
// database is the directory's SQLite file, or `database_url` (a PostgreSQL database).
class PreparedState {
public:
    explicit PreparedState(const std::function<void(TaskConfig&)>& adjust = {}, const std::string& database_url = "")
        : state_(dir_.path() / "state", database_url) {
        write_synthetic_dataset(dir_.path() / "data");
        initialize_state(state_).value();
        auto store = Store::connect(state_.database_url(), false).value();
        auto config = small_task_config(dir_.path() / "data", PolicyKind::FedAsync);
        config.max_in_flight = 100;
        if (adjust) adjust(config);
        config_ = config;
        create_task(state_, *store, config).value();
    }
    const StateDir& state() const { return state_; }
    const TaskConfig& config() const { return config_; }
    const std::filesystem::path& dir() const { return dir_.path(); }

private:
    TempDir dir_;
    StateDir state_;
    TaskConfig config_;
};

// Runs a tessera-server command on the prepared state to its end; its exit status.
inline int server_command(std::vector<std::string> args, const PreparedState& prepared) {
    args.insert(args.begin(), required_env("TESSERA_SERVER"));
    args.insert(args.end(), {"--state", prepared.state().root().string(), "--db", prepared.state().database_url()});
    return ChildProcess(args).wait();
}

class ServerProcess {
public:
    ServerProcess(const StateDir& state, const std::vector<std::string>& extra = {}) {
        const char* binary = std::getenv("TESSERA_SERVER");
        if (binary == nullptr) throw std::runtime_error("TESSERA_SERVER is not set (meson sets it)");
        std::vector<std::string> argv{binary, "run", "--state", state.root().string(), "--listen", "127.0.0.1:0"};
        if (!state.database_url().starts_with("sqlite:")) argv.insert(argv.end(), {"--db", state.database_url()});
        argv.insert(argv.end(), extra.begin(), extra.end());
        process_ = std::make_unique<ChildProcess>(argv);
        auto line = process_->read_line();  // "tessera-server listening on http://127.0.0.1:PORT"
        auto colon = line.rfind(':');
        if (line.find("listening") == std::string::npos || colon == std::string::npos)
            throw std::runtime_error("tessera-server did not start: " + line);
        port_ = static_cast<std::uint16_t>(std::stoi(line.substr(colon + 1)));
    }
    std::uint16_t port() const { return port_; }
    ChildProcess& process() { return *process_; }

private:
    std::unique_ptr<ChildProcess> process_;
    std::uint16_t port_ = 0;
};

}  // namespace tessera::testing
