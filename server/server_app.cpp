// ServerApp: the components with their HTTP front end; start-up order and graceful shutdown.
#include "server_app.h"

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

#include <condition_variable>
#include <thread>

#include "api.h"
#include "dashboard.h"
#include "event_hub.h"
#include "io_thread.h"
#include "logger.h"
#include "server_core.h"
#include "worker_guard.h"

namespace tessera::server {

struct ServerApp::Parts {
    std::unique_ptr<ServerCore> core;
    std::unique_ptr<Dashboard> dashboard;
    std::unique_ptr<EventHub> events;
    std::unique_ptr<Api> api;
    std::unique_ptr<boost::asio::thread_pool> handler_pool;  // outlives io: answers in flight finish
    boost::asio::io_context io;
    std::unique_ptr<HttpServer> http;
    std::vector<std::thread> io_threads;
    std::thread ticker;

    std::mutex mutex;
    std::condition_variable stopping_changed;
    bool stopping = false;
    bool stopped = false;
};

namespace {

// What a transitioner tick found that an operator must hear about.
void log_tick(const TickReport& report) {
    const auto& log = common::process_log();
    for (const auto& error : report.task_errors) log.error("transitioner", "transitioner: " + error);
    for (const auto& stall : report.stalls) log.warning("stalled", stall);
    for (const auto& task : report.merging_again)
        log.info("merging_again", "task " + task + " merges again", {{"task_id", task}});
}

// The transitioner's timer: its own thread, ticking on a deadline until stop(). Ticks do
// database work, which has no place on the I/O threads.
void tick_until_stopped(ServerApp::Parts& p) {
    std::unique_lock lock(p.mutex);
    auto next = std::chrono::steady_clock::now();
    while (!p.stopping) {
        next += std::chrono::seconds(p.core->options().tick_interval_s);
        if (p.stopping_changed.wait_until(lock, next, [&p] { return p.stopping; })) break;
        lock.unlock();
        common::run_guarded("transitioner", [&p] {
            if (auto report = p.core->transitioner().tick(); !report)
                common::process_log().error("transitioner", "transitioner: " + report.message());
            else
                log_tick(*report);
            if (auto analyzed = p.core->store().refresh_statistics(std::chrono::steady_clock::now()); !analyzed)
                common::process_log().error("statistics", "planner statistics: " + analyzed.message());
        });
        lock.lock();
    }
}

ApiLimits api_limits(const ServerOptions& options) {
    ApiLimits limits;
    limits.registrations_per_window = options.registrations_per_hour;
    limits.min_client_version = options.min_client_version;
    limits.recommended_client_version = options.recommended_client_version;
    return limits;
}

}  // namespace

ServerApp::ServerApp(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
ServerApp::~ServerApp() { stop(); }

common::Result<std::unique_ptr<ServerApp>> ServerApp::start(ServerOptions options) {
    auto parts = std::make_unique<Parts>();
    auto& p = *parts;
    // Received deltas are spooled beside the result files: moved into place, not copied.
    options.http.upload_spool_directory = options.state.results();
    if (options.file_system) options.http.upload_spool_files = options.file_system;
    auto built = ServerCore::build(std::move(options));
    if (!built) return built.error();
    p.core = std::move(*built);
    auto& core = *p.core;
    const auto& settings = core.options();
    auto token = core.store().setting("operator_token_sha256");
    if (!token) return token.error();
    auto* tasks = &core.tasks();
    auto facts_of = [tasks](const std::string& id) -> std::shared_ptr<const TaskFacts> {
        auto runtime = tasks->find(id);
        return runtime ? runtime->facts : nullptr;
    };
    p.dashboard = std::make_unique<Dashboard>(
        core.store(), facts_of, RunFacts{settings.clock(), settings.state, &core.files()}, settings.clock);
    p.events = std::make_unique<EventHub>(core.store(), std::chrono::milliseconds(500));
    p.api = std::make_unique<Api>(core.store(), core.blobs(), core.published(), core.volunteers(), *p.dashboard,
                                  *p.events, core.metrics(), core.key().verify_key(), token->value_or(""),
                                  settings.clock, api_limits(settings), core.delta_caps());

    // Bind first: a busy port or a bad certificate fails before any work starts. Requests
    // wait until the I/O threads run.
    p.handler_pool = std::make_unique<boost::asio::thread_pool>(settings.handler_threads);
    p.http = std::make_unique<HttpServer>(p.io, *p.handler_pool, *p.api, settings.http);
    if (auto status = p.http->start(); !status) return status.error();
    if (auto status = core.start(); !status) return status.error();

    Parts* raw = &p;
    for (std::size_t i = 0; i < settings.io_threads; ++i)
        p.io_threads.emplace_back([raw] {
            mark_io_thread();
            // A handler that throws ends run(): logged and counted, and the thread runs on.
            while (!common::run_guarded("io", [raw] { raw->io.run(); })) {
            }
        });
    if (settings.tick_interval_s > 0) p.ticker = std::thread([raw] { tick_until_stopped(*raw); });
    return std::unique_ptr<ServerApp>(new ServerApp(std::move(parts)));
}

void ServerApp::stop() {
    auto& p = *parts_;
    {
        std::lock_guard lock(p.mutex);
        if (p.stopped) return;
        p.stopped = true;
        p.stopping = true;
    }
    p.stopping_changed.notify_all();
    if (p.ticker.joinable()) p.ticker.join();
    p.http->drain(std::chrono::seconds(10));  // responses in flight are sent
    p.io.stop();
    for (auto& thread : p.io_threads) thread.join();
    p.handler_pool->join();  // requests being answered finish (their validations are queued)
    p.core->stop();          // queued validations finish and reach the aggregators; tasks stop
}

std::uint16_t ServerApp::port() const { return parts_->http->port(); }
Store& ServerApp::store() { return parts_->core->store(); }
Transitioner& ServerApp::transitioner() { return parts_->core->transitioner(); }
ValidationStage& ServerApp::validation() { return parts_->core->validation(); }
bool ServerApp::leading(const std::string& task_id) const {
    auto runtime = parts_->core->tasks().find(task_id);
    return runtime && runtime->aggregator->leading();
}

common::Status ServerApp::refresh_tasks() { return parts_->core->tasks().refresh(); }
void ServerApp::wait_idle() { parts_->core->wait_idle(); }

}  // namespace tessera::server
