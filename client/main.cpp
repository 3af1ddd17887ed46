// tessera-client: the volunteer's program (README, "Join a run").
#include <cxxopts.hpp>

#include <iostream>
#include <thread>

#include "allocator_tuning.h"
#include "stop_signals.h"
#include "volunteer.h"

namespace {

// Ctrl-C once: finish the current work unit, then stop. Twice: abandon it now.
void watch_signals(sigset_t signals, tessera::client::VolunteerControl* control) {
    for (int count = 0;; ++count) {
        int received = 0;
        sigwait(&signals, &received);
        if (count == 0) {
            std::cerr << "\ntessera-client: stopping after the current work unit (Ctrl-C again to abandon it)\n";
            control->stop_after_unit = true;
        } else {
            control->abandon_now = true;
            return;
        }
    }
}

}  // namespace

int main(int argc, char** argv) {
    using namespace tessera::client;
    cxxopts::Options options("tessera-client", "Lend your GPU (or CPU) to a Tessera training run");
    options.add_options()("server", "server URL, e.g. https://host:8443", cxxopts::value<std::string>())(
        "state", "state directory (key, identity, cache)",
        cxxopts::value<std::string>()->default_value(".tessera-client"))(
        "device", "auto, cpu or cuda:N", cxxopts::value<std::string>()->default_value("auto"))(
        "threads", "CPU threads for training (0: all)", cxxopts::value<int>()->default_value("0"))(
        "max-gpu-mem", "cap GPU memory use at this many GB (0: no cap)", cxxopts::value<double>()->default_value("0"))(
        "cache-quota", "blob cache size in GB", cxxopts::value<double>()->default_value("4"))(
        "once", "stop after one work unit")("name", "name shown on the leaderboard",
                                            cxxopts::value<std::string>()->default_value("volunteer"))(
        "quiet", "no progress bars, errors only")("json-logs", "one JSON object per line on stdout")(
        "ca-cert", "trust this CA file for the server's TLS certificate",
        cxxopts::value<std::string>()->default_value(""))("heartbeat", "seconds between heartbeats while training",
                                                          cxxopts::value<double>()->default_value("30"))(
        "h,help", "show this help");
    VolunteerOptions volunteer;
    try {
        auto args = options.parse(argc, argv);
        if (args.count("help")) {
            std::cout << options.help() << "\n";
            return 0;
        }
        if (!args.count("server")) {
            std::cerr << "tessera-client: needs --server URL\n";
            return 2;
        }
        volunteer.server = args["server"].as<std::string>();
        volunteer.state_dir = args["state"].as<std::string>();
        volunteer.device = args["device"].as<std::string>();
        volunteer.threads = args["threads"].as<int>();
        volunteer.max_gpu_memory_gb = args["max-gpu-mem"].as<double>();
        auto quota_gb = args["cache-quota"].as<double>();
        if (!(quota_gb >= 0 && quota_gb <= 1e6)) {
            std::cerr << "tessera-client: --cache-quota must be between 0 and 1000000 GB\n";
            return 2;
        }
        volunteer.cache_quota_bytes = static_cast<std::uint64_t>(quota_gb * (1 << 30));
        volunteer.once = args.count("once") > 0;
        volunteer.name = args["name"].as<std::string>();
        volunteer.quiet = args.count("quiet") > 0;
        volunteer.json_logs = args.count("json-logs") > 0;
        volunteer.ca_file = args["ca-cert"].as<std::string>();
        auto heartbeat_s = args["heartbeat"].as<double>();
        if (!(heartbeat_s >= 0.1 && heartbeat_s <= 3600)) {
            std::cerr << "tessera-client: --heartbeat must be between 0.1 and 3600 seconds\n";
            return 2;
        }
        volunteer.heartbeat_interval = std::chrono::milliseconds(static_cast<std::int64_t>(heartbeat_s * 1000));
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-client: " << error.what() << "\n";
        return 2;
    }
    tessera::common::tune_allocator_for_training();
    auto signals = tessera::common::block_stop_signals();
    VolunteerControl control;
    std::thread(watch_signals, signals, &control).detach();

    auto stop = run_volunteer(volunteer, control);
    if (!stop.message.empty()) std::cerr << "tessera-client: " << stop.message << "\n";
    return exit_code(stop.reason);
}
