// `tessera-server run`: serve until SIGINT or SIGTERM, then shut down gracefully.
#include <cxxopts.hpp>

#include "allocator_tuning.h"
#include "client_address.h"
#include "command_line.h"
#include "command_support.h"
#include "logger.h"
#include "options_with_config.h"
#include "stop_signals.h"
#include "server_app.h"
#include "tessera_version.h"
#include "version_number.h"
#include "bytes.h"

namespace tessera::server {
namespace {

common::Result<std::pair<std::string, std::uint16_t>> parse_listen(const std::string& text) {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return common::make_error("--listen must be ADDR:PORT");
    int port = -1;
    try {
        port = std::stoi(text.substr(colon + 1));
    } catch (const std::exception&) {
    }
    if (port < 0 || port > 65535) return common::make_error("--listen: bad port in '" + text + "'");
    auto host = text.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    return std::make_pair(host, static_cast<std::uint16_t>(port));
}

// Every default is ServerOptions' own.
cxxopts::Options run_options() {
    const ServerOptions defaults;
    const auto& http = defaults.http;
    auto text = [](auto value) { return std::to_string(value); };
    cxxopts::Options options("tessera-server run", "Serve the API, blobs and work");
    options.add_options()("state", "state directory", cxxopts::value<std::string>())(
        "listen", "address and port (port 0: any free port)",
        cxxopts::value<std::string>()->default_value(http.address + ":" + text(http.port)))(
        "tls-cert", "PEM certificate chain: serve HTTPS", cxxopts::value<std::string>()->default_value(""))(
        "tls-key", "PEM private key of the certificate", cxxopts::value<std::string>()->default_value(""))(
        "blob-url-base", "work units send volunteers to URL/<sha256> for blobs (an HTTP cache of blobs/)",
        cxxopts::value<std::string>()->default_value(""))(
        "io-threads", "threads moving HTTP bytes",
        cxxopts::value<std::size_t>()->default_value(text(defaults.io_threads)))(
        "handler-threads", "threads answering requests (database, hashing, fsync, signing)",
        cxxopts::value<std::size_t>()->default_value(text(defaults.handler_threads)))(
        "work-threads", "threads for loss checks, evaluation and samples (LibTorch)",
        cxxopts::value<std::size_t>()->default_value(text(defaults.work_threads)))(
        "validation-threads", "results validated at once (each holds its delta decoded)",
        cxxopts::value<std::size_t>()->default_value(text(defaults.validation_threads)))(
        "max-connections", "open connections at most",
        cxxopts::value<std::size_t>()->default_value(text(http.max_connections)))(
        "upload-spool", "MiB of upload bodies being received at once, spooled to disk (one is always let in)",
        cxxopts::value<std::uint64_t>()->default_value(text(http.upload_spool_bytes >> 20)))(
        "uploads-per-volunteer", "upload bodies of one volunteer received at once",
        cxxopts::value<std::size_t>()->default_value(text(http.max_uploads_per_client)))(
        "upload-min-rate",
        "KiB/s an upload's body must average once its first " + text(http.upload_pace.grace.count()) +
            " s have passed (0: no minimum)",
        cxxopts::value<std::uint64_t>()->default_value(text(http.upload_pace.min_bytes_per_s >> 10)))(
        "upload-idle-timeout", "seconds an upload's body may send nothing before its connection is closed",
        cxxopts::value<std::int64_t>()->default_value(text(http.upload_pace.idle_timeout.count())))(
        "tick", "seconds between deadline checks",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.tick_interval_s)))(
        "registrations-per-hour", "new volunteers one address may register per hour; 0: no limit",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.registrations_per_hour)))(
        "trusted-proxy",
        "reverse proxies (their addresses, e.g. 127.0.0.1) whose X-Forwarded-For names the client "
        "(empty: none)",
        cxxopts::value<std::string>()->default_value(""))(
        "min-client-version", "refuse to register clients older than this release (e.g. 0.2.0; empty: any)",
        cxxopts::value<std::string>()->default_value(""))(
        "recommended-client-version", "tell clients older than this release to update (empty: this server's own)",
        cxxopts::value<std::string>()->default_value(""))(
        "checkpoint-every", "with downlink patches: a full checkpoint every N versions (1: every version)",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.checkpoint_every)))(
        "checkpoint-interval", "with downlink patches: a full checkpoint at least every S seconds",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.checkpoint_interval_s)))(
        "keep-checkpoints", "retention: keep the newest N checkpoints and what follows them; 0: keep everything",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.keep_checkpoints)))(
        "aggregator-lease",
        "processes on one database: another runs a task's aggregator when its runner has not renewed its lease "
        "for S seconds",
        cxxopts::value<std::int64_t>()->default_value(text(defaults.aggregator_lease_s)))(
        "json-logs", "log one JSON object per line (event, level, message, time, fields) instead of text");
    add_database_option(options);
    common::add_config_option(options);
    return options;
}

// The server's settings from the parsed options, or what is wrong with them.
common::Result<ServerOptions> server_options_of(const cxxopts::ParseResult& args) {
    auto fail = [](const std::string& message) { return common::Result<ServerOptions>(common::make_error(message)); };
    if (!args.count("state")) return fail("needs --state DIR");
    auto listen = parse_listen(args["listen"].as<std::string>());
    if (!listen) return listen.error();
    auto base = args["blob-url-base"].as<std::string>();
    while (base.ends_with('/')) base.pop_back();
    if (!base.empty() && !base.starts_with("http://") && !base.starts_with("https://"))
        return fail("--blob-url-base must be an http(s) URL");
    ServerOptions server;
    server.state = state_dir_of(args);
    server.http.address = listen->first;
    server.http.port = listen->second;
    server.http.tls_cert = args["tls-cert"].as<std::string>();
    server.http.tls_key = args["tls-key"].as<std::string>();
    server.http.max_connections = args["max-connections"].as<std::size_t>();
    server.http.upload_spool_bytes = args["upload-spool"].as<std::uint64_t>() * common::kMiB;
    server.http.max_uploads_per_client = args["uploads-per-volunteer"].as<std::size_t>();
    if (server.http.max_uploads_per_client < 1) return fail("--uploads-per-volunteer must be >= 1");
    auto min_rate = args["upload-min-rate"].as<std::uint64_t>();
    if (min_rate > (1 << 20)) return fail("--upload-min-rate must be at most 1048576 KiB/s");
    server.http.upload_pace.min_bytes_per_s = min_rate << 10;
    auto idle = args["upload-idle-timeout"].as<std::int64_t>();
    if (idle < 1 || idle > 86400) return fail("--upload-idle-timeout must be 1 to 86400 seconds");
    server.http.upload_pace.idle_timeout = std::chrono::seconds(idle);
    server.blob_base_url = base;
    server.io_threads = std::max<std::size_t>(1, args["io-threads"].as<std::size_t>());
    server.handler_threads = std::max<std::size_t>(1, args["handler-threads"].as<std::size_t>());
    server.work_threads = std::max<std::size_t>(1, args["work-threads"].as<std::size_t>());
    server.validation_threads = std::max<std::size_t>(1, args["validation-threads"].as<std::size_t>());
    server.tick_interval_s = std::max<std::int64_t>(1, args["tick"].as<std::int64_t>());
    auto proxies = parse_trusted_proxies(args["trusted-proxy"].as<std::string>());
    if (!proxies) return fail("--trusted-proxy: " + proxies.message());
    server.http.trusted_proxies = *proxies;
    server.registrations_per_hour = args["registrations-per-hour"].as<std::int64_t>();
    if (server.registrations_per_hour < 0) return fail("--registrations-per-hour must be >= 0");
    server.min_client_version = args["min-client-version"].as<std::string>();
    server.recommended_client_version = args["recommended-client-version"].as<std::string>();
    if (server.recommended_client_version.empty()) server.recommended_client_version = common::kVersion;
    for (const auto* version : {&server.min_client_version, &server.recommended_client_version})
        if (!version->empty() && !common::parse_version(*version))
            return fail("--min-client-version and --recommended-client-version must be versions such as 1.2.3");
    server.checkpoint_every = args["checkpoint-every"].as<std::int64_t>();
    server.checkpoint_interval_s = args["checkpoint-interval"].as<std::int64_t>();
    server.keep_checkpoints = args["keep-checkpoints"].as<std::int64_t>();
    if (server.checkpoint_every < 1 || server.checkpoint_interval_s < 0 || server.keep_checkpoints < 0)
        return fail("--checkpoint-every must be >= 1, --checkpoint-interval and --keep-checkpoints >= 0");
    server.aggregator_lease_s = args["aggregator-lease"].as<std::int64_t>();
    if (server.aggregator_lease_s < 2) return fail("--aggregator-lease must be >= 2 seconds");
    return server;
}

}  // namespace

int run_command(int argc, char** argv) {
    auto options = run_options();
    auto parsed = common::parse_command_line(options, argc, argv, true);
    if (!parsed) return parsed.exit_code;
    const auto& args = *parsed;
    auto server = server_options_of(args);
    if (!server) return fail("run", server.message());
    bool json_logs = args.count("json-logs") > 0;
    common::set_process_log(
        common::Logger("tessera-server", false, json_logs, "", common::Logger::InfoStream::Stderr));
    common::Logger log("tessera-server", false, json_logs);  // where it listens, when it stops
    common::tune_allocator_for_training();

    // Signals are taken synchronously by this thread; every other thread inherits the mask.
    auto signals = common::block_stop_signals();
    bool tls = !server->http.tls_cert.empty();
    auto address = server->http.address;
    auto app = ServerApp::start(std::move(*server));
    if (!app) return fail("run", app.message());
    auto url = std::string(tls ? "https" : "http") + "://" + address + ":" + std::to_string((*app)->port());
    log.info("listening", "tessera-server listening on " + url, {{"url", url}, {"port", (*app)->port()}});
    int received = 0;
    sigwait(&signals, &received);
    log.info("stopping",
             std::string("tessera-server: ") + (received == SIGINT ? "SIGINT" : "SIGTERM") + ", shutting down");
    (*app)->stop();
    log.info("stopped", "tessera-server: stopped");
    return 0;
}

}  // namespace tessera::server
