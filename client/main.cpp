// tessera-client: the volunteer's program (README, "Join a run").
#include <cxxopts.hpp>

#include <boost/json.hpp>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <csignal>
#include <iostream>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "allocator_tuning.h"
#include "bytes.h"
#include "doctor.h"
#include "local_control.h"
#include "options_with_config.h"
#include "rate_limiter.h"
#include "result_upload.h"
#include "several_servers.h"
#include "stop_signals.h"
#include "tessera_version.h"
#include "volunteer.h"

namespace {

// Whether another stop signal comes within `wait` (false: the time ran out).
bool second_signal_within(const sigset_t& signals, std::chrono::milliseconds wait) {
    auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return false;
        timespec timeout{static_cast<time_t>(left.count() / 1'000'000'000), static_cast<long>(left.count() % 1'000'000'000)};
        if (sigtimedwait(&signals, nullptr, &timeout) >= 0) return true;
        if (errno != EINTR) return false;
    }
}

// Ctrl-C (or SIGTERM) once: finish the current work unit, then stop; twice, or once and then
// `grace` without the unit finishing (0: no limit): give the unit back now.
void watch_signals(sigset_t signals, std::chrono::milliseconds grace, tessera::client::VolunteerControl* control) {
    int received = 0;
    sigwait(&signals, &received);
    std::cerr << "\ntessera-client: stopping after the current work unit (Ctrl-C again to give it back now)\n";
    control->stop_after_unit = true;
    if (grace.count() > 0) {
        if (!second_signal_within(signals, grace))
            std::cerr << "tessera-client: the unit did not finish within " << grace.count() / 1000.0
                      << " s of the stop request: giving it back\n";
    } else {
        sigwait(&signals, &received);
    }
    control->abandon_now = true;
}

// The volunteer's settings from the command line (and --config), or the exit code to end with.
struct CommandLine {
    tessera::client::VolunteerOptions volunteer;
    std::vector<tessera::client::ServerShare> servers;
    std::chrono::milliseconds stop_grace{0};
    // "doctor" (check, print, exit), or status|pause|resume|finish|quit (to the running
    // client); empty: volunteer.
    std::string subcommand;
    int exit_code = -1;  // >= 0: exit at once (help printed, or a mistake reported)
};

// A default as the help shows it.
std::string plain(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return std::string(text);
}

// Look-ahead (docs/operations.md, "Look-ahead"): transfers hidden behind training.
void add_look_ahead_options(cxxopts::Options& options, const tessera::client::VolunteerOptions& defaults) {
    options.add_options("Transfers behind training")(
        "look-ahead-s",
        "fetch the next unit while this one trains, once the training left is within this many seconds plus twice the "
        "last download's time, and upload a result while the next trains (0: never; try 2 on a slow link)",
        cxxopts::value<double>()->default_value(
            plain(std::chrono::duration<double>(defaults.look_ahead_lead).count())))(
        "look-ahead-share", "look ahead only when transfers took at least this share of the training time (0: always)",
        cxxopts::value<double>()->default_value(plain(defaults.look_ahead_share)));
}

// Defaults written as VolunteerOptions has them.
cxxopts::Options client_options() {
    const tessera::client::VolunteerOptions defaults;
    cxxopts::Options options("tessera-client",
                             "Lend your GPU (or CPU) to a Tessera training run.\n"
                             "  tessera-client doctor [options]: check this machine, the state directory and the server\n"
                             "  tessera-client status|pause|resume|finish|quit [--state DIR | --config FILE]: control the\n"
                             "    client running on that state directory");
    options.add_options()("server", "server URL, e.g. https://host:8443; several, comma-separated, share the machine",
                          cxxopts::value<std::string>())(
        "share",
        "with several servers: each one's share of the machine's time, comma-separated in the same order "
        "(default 1 each)",
        cxxopts::value<std::string>()->default_value(""))(
        "state", "state directory (key, identity, cache)",
        cxxopts::value<std::string>()->default_value(".tessera-client"))(
        "device", "auto, cpu or cuda:N", cxxopts::value<std::string>()->default_value(defaults.device))(
        "threads", "CPU threads for training (0: all)", cxxopts::value<int>()->default_value("0"))(
        "max-gpu-mem", "cap GPU memory use at this many GB (0: no cap)", cxxopts::value<double>()->default_value("0"))(
        "cache-quota", "blob cache size in GB",
        cxxopts::value<double>()->default_value(plain(static_cast<double>(defaults.cache_quota_bytes >> 30))))(
        "once", "stop after one work unit")("name", "name shown on the leaderboard",
                                            cxxopts::value<std::string>()->default_value(defaults.name))(
        "quiet", "no progress bars, errors only")("json-logs", "one JSON object per line on stdout")(
        "ca-cert", "trust this CA file for the server's TLS certificate",
        cxxopts::value<std::string>()->default_value(""))(
        "heartbeat", "seconds between heartbeats while training",
        cxxopts::value<double>()->default_value(
            plain(std::chrono::duration<double>(defaults.heartbeat_interval).count())))(
        "stop-grace", "seconds a stop request waits for the current unit before giving it back (0: no limit)",
        cxxopts::value<double>()->default_value("0"))(

        "version", "print the version and exit")("h,help", "show this help");
    options.add_options("When to work")(
        "idle-minutes", "work only once the user has been idle this many minutes (0: whether or not they are active)",
        cxxopts::value<double>()->default_value("0"))(
        "run-on-battery", "work on battery power too (default: wait while a battery discharges)")(
        "work-hours", "work only within these local times, e.g. 22:00-07:00,12:00-13:30 (empty: any time)",
        cxxopts::value<std::string>()->default_value(""))(
        "exclusive-apps", "wait while any of these programs runs, e.g. steam,blender (names as `ps -e` shows them)",
        cxxopts::value<std::string>()->default_value(""))("max-download-mbps",
                                                          "cap downloads at this many megabits per second (0: no cap)",
                                                          cxxopts::value<double>()->default_value("0"))(
        "max-upload-mbps", "cap uploads at this many megabits per second (0: no cap)",
        cxxopts::value<double>()->default_value("0"))(
        "tasks", "take only these of a server's tasks: task ids or model presets, e.g. cnn,dit-tiny (empty: any)",
        cxxopts::value<std::string>()->default_value(""))("exclude-tasks",
                                                          "never take these tasks: task ids or model presets",
                                                          cxxopts::value<std::string>()->default_value(""));
    add_look_ahead_options(options, defaults);
    tessera::common::add_config_option(options);
    return options;
}

CommandLine usage_error(const std::string& message) {
    std::cerr << "tessera-client: " << message << "\n";
    CommandLine line;
    line.exit_code = 2;
    return line;
}

// When the owner lets the client work: idle time, battery, hours, exclusive programs, tasks.
tessera::common::Status read_preferences(const cxxopts::ParseResult& args,
                                         tessera::client::WorkPreferences& preferences) {
    preferences.idle_minutes = args["idle-minutes"].as<double>();
    if (!(preferences.idle_minutes >= 0 && preferences.idle_minutes <= 1440))
        return tessera::common::make_error("--idle-minutes must be between 0 and 1440");
    preferences.run_on_battery = args.count("run-on-battery") > 0;
    auto hours = tessera::client::parse_time_windows(args["work-hours"].as<std::string>());
    if (!hours) return tessera::common::make_error("--work-hours: " + hours.message());
    preferences.work_hours = *hours;
    auto apps = tessera::client::parse_program_names(args["exclusive-apps"].as<std::string>());
    if (!apps) return tessera::common::make_error("--exclusive-apps: " + apps.message());
    preferences.exclusive_apps = *apps;
    for (auto [name, field] :
         {std::pair{"tasks", &preferences.tasks.only}, std::pair{"exclude-tasks", &preferences.tasks.exclude}}) {
        auto names = tessera::client::parse_task_names(args[name].as<std::string>());
        if (!names) return tessera::common::make_error(std::string("--") + name + ": " + names.message());
        *field = *names;
    }
    return {};
}

// The transfer rate caps, Mbit/s (0: none).
tessera::common::Status read_rate_caps(const cxxopts::ParseResult& args, tessera::client::VolunteerOptions& volunteer) {
    for (auto [name, field] : {std::pair{"max-download-mbps", &volunteer.max_download_mbps},
                               std::pair{"max-upload-mbps", &volunteer.max_upload_mbps}}) {
        *field = args[name].as<double>();
        if (!(*field == 0 || (*field >= 0.01 && *field <= 1e6)))
            return tessera::common::make_error(std::string("--") + name +
                                               " must be 0 (no cap) or between 0.01 and 1000000");
    }
    return {};
}

tessera::common::Status read_look_ahead(const cxxopts::ParseResult& args,
                                        tessera::client::VolunteerOptions& volunteer) {
    auto lead_s = args["look-ahead-s"].as<double>();
    if (!(lead_s >= 0 && lead_s <= 86400))
        return tessera::common::make_error("--look-ahead-s must be between 0 and 86400 seconds");
    volunteer.look_ahead_lead = std::chrono::milliseconds(static_cast<std::int64_t>(lead_s * 1000));
    volunteer.look_ahead_share = args["look-ahead-share"].as<double>();
    if (!(volunteer.look_ahead_share >= 0 && volunteer.look_ahead_share <= 100))
        return tessera::common::make_error("--look-ahead-share must be between 0 and 100");
    return {};
}

CommandLine parse_command_line(int argc, char** argv) {
    auto options = client_options();
    std::string word = argc > 1 ? argv[1] : "";
    bool subcommand = word == "doctor" || word == "status" || word == "pause" || word == "resume" ||
                      word == "finish" || word == "quit";
    if (subcommand) {  // the subcommands take the same options
        argv[1] = argv[0];
        ++argv;
        --argc;
    }
    auto parsed = tessera::common::parse_with_config(options, argc, argv);
    if (!parsed) return usage_error(parsed.message());
    const auto& args = *parsed;
    CommandLine line;
    if (subcommand) line.subcommand = word;
    if (args.count("help")) {
        std::cout << options.help() << "\n";
        line.exit_code = 0;
        return line;
    }
    if (args.count("version")) {
        std::cout << "tessera-client " << tessera::common::kVersion << "\n";
        line.exit_code = 0;
        return line;
    }
    if (!args.count("server") && !subcommand) return usage_error("needs --server URL");
    auto& volunteer = line.volunteer;
    if (args.count("server")) {
        auto servers =
            tessera::client::servers_with_shares(args["server"].as<std::string>(), args["share"].as<std::string>());
        if (!servers) return usage_error(servers.message());
        line.servers = *servers;
        volunteer.server = line.servers.front().url;
    }
    volunteer.state_dir = args["state"].as<std::string>();
    volunteer.device = args["device"].as<std::string>();
    volunteer.threads = args["threads"].as<int>();
    volunteer.max_gpu_memory_gb = args["max-gpu-mem"].as<double>();
    auto quota_gb = args["cache-quota"].as<double>();
    if (!(quota_gb >= 0 && quota_gb <= 1e6)) return usage_error("--cache-quota must be between 0 and 1000000 GB");
    volunteer.cache_quota_bytes = static_cast<std::uint64_t>(quota_gb * double(tessera::common::kGiB));
    volunteer.once = args.count("once") > 0;
    volunteer.name = args["name"].as<std::string>();
    volunteer.quiet = args.count("quiet") > 0;
    volunteer.json_logs = args.count("json-logs") > 0;
    volunteer.ca_file = args["ca-cert"].as<std::string>();
    auto heartbeat_s = args["heartbeat"].as<double>();
    if (!(heartbeat_s >= 0.1 && heartbeat_s <= 3600)) return usage_error("--heartbeat must be between 0.1 and 3600 seconds");
    volunteer.heartbeat_interval = std::chrono::milliseconds(static_cast<std::int64_t>(heartbeat_s * 1000));
    auto grace_s = args["stop-grace"].as<double>();
    if (!(grace_s >= 0 && grace_s <= 86400)) return usage_error("--stop-grace must be between 0 and 86400 seconds");
    line.stop_grace = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(grace_s * 1000)));
    if (auto read = read_preferences(args, volunteer.preferences); !read) return usage_error(read.message());
    if (auto read = read_rate_caps(args, volunteer); !read) return usage_error(read.message());
    if (auto read = read_look_ahead(args, volunteer); !read) return usage_error(read.message());
    return line;
}

// `tessera-client status|pause|…`: the running client's answer, for a person (or as JSON).
// The largest result (MB) an upload cap of `cap_mbps` gets to a server at tessera-server's
// default upload pace (its body must average 8 KiB/s once 300 s have passed); none when the cap
// is faster than that, or not set.
std::optional<long long> largest_upload_mb(double cap_mbps) {
    constexpr auto kMinBytesPerS = static_cast<double>(tessera::common::kDefaultUploadMinBytesPerS);
    constexpr auto kGraceS = static_cast<double>(tessera::common::kDefaultUploadGraceS);
    double rate = tessera::client::RateLimiter::bytes_per_second_of_mbps(cap_mbps);
    if (!(cap_mbps > 0) || rate >= kMinBytesPerS) return std::nullopt;
    return static_cast<long long>(kGraceS / (1 / rate - 1 / kMinBytesPerS) / 1e6);
}

int send_command(const std::filesystem::path& state_dir, const std::string& command, bool json) {
    auto answer = tessera::client::send_control_command(state_dir, command);
    if (!answer) {
        std::cerr << "tessera-client " << command << ": " << answer.message() << "\n";
        return 1;
    }
    boost::system::error_code error;
    auto parsed = boost::json::parse(*answer, error);
    if (error || !parsed.is_object() || !parsed.as_object().if_contains("ok")) {
        std::cerr << "tessera-client " << command << ": a malformed answer: " << *answer << "\n";
        return 1;
    }
    const auto& object = parsed.as_object();
    bool ok = object.at("ok").as_bool();
    if (json)
        std::cout << *answer << "\n";
    else if (command == "status" && ok)
        std::cout << tessera::client::describe_status(object);
    else
        (ok ? std::cout : std::cerr) << "tessera-client " << command << ": " << object.at("message").as_string().c_str()
                                     << "\n";
    return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
    using namespace tessera::client;
    CommandLine line;
    try {
        line = parse_command_line(argc, argv);
    } catch (const cxxopts::exceptions::exception& error) {
        line = usage_error(error.what());
    }
    if (line.exit_code >= 0) return line.exit_code;
    if (line.subcommand == "doctor") return run_doctor(line.volunteer, std::cout, line.servers);
    if (!line.subcommand.empty())
        return send_command(line.volunteer.state_dir, line.subcommand, line.volunteer.json_logs);
    if (auto most = largest_upload_mb(line.volunteer.max_upload_mbps))
        std::cerr << "tessera-client: at " << line.volunteer.max_upload_mbps << " Mbit/s a result over " << *most
                  << " MB cannot reach a server at its default minimum upload rate (64 kbit/s after 300 s)\n";
    tessera::common::tune_allocator_for_training();
    auto signals = tessera::common::block_stop_signals();
    VolunteerControl control;
    if (line.servers.size() > 1)  // their boards, before the control socket's thread reads them
        for (std::size_t i = 0; i < line.servers.size(); ++i) control.servers.emplace_back();
    auto local = LocalControl::open(line.volunteer.state_dir, control);
    if (!local) {
        std::cerr << "tessera-client: " << local.message() << "\n";
        return 1;
    }
    std::thread(watch_signals, signals, line.stop_grace, &control).detach();

    auto stop = run_volunteers(line.volunteer, line.servers, control);
    if (!stop.message.empty()) std::cerr << "tessera-client: " << stop.message << "\n";
    return exit_code(stop.reason);
}
