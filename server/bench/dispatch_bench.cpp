// The dispatch benchmark: register, then ask and return as fast as the server answers.
#include "dispatch_bench.h"

#include <boost/json.hpp>
#include <cxxopts.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>

#include <pthread.h>

#include "bytes.h"
#include "checkpoint.h"
#include "command_line.h"
#include "database.h"
#include "delta_codec.h"
#include "file_io.h"
#include "http_client.h"
#include "made_up_results.h"
#include "percentile.h"
#include "result_upload.h"
#include "server_api.h"
#include "server_app.h"
#include "task_setup.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;
using server::ServerApp;

double milliseconds_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

struct Volunteer {
    common::SigningKey key;
    std::unique_ptr<client::ServerApi> api;
};

// What one client thread measured.
struct ThreadTally {
    std::vector<double> work_ms, upload_ms, unit_ms;
    std::int64_t units = 0, no_work = 0, failures = 0;
    std::string first_failure;

    void fail(const std::string& what) {
        if (failures++ == 0) first_failure = what;
    }
};

// A delta of the task's model with small random values, encoded as the task asks.
common::Result<common::Bytes> made_up_delta(server::Store& store, const server::StateDir& state,
                                            const common::DeltaEncoding& encoding) {
    auto task = store.current_task();
    if (!task || !*task) return common::make_error("no task");
    auto versions = store.versions((*task)->id);
    if (!versions) return versions.error();
    auto bytes = common::read_file(state.blobs() / versions->at(0).blob_sha256, 4 * common::kGiB);
    if (!bytes) return bytes.error();
    auto model = common::read_checkpoint(*bytes);
    if (!model) return model.error();
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0, 1e-3f);
    for (auto& tensor : *model)
        for (auto& value : tensor.values) value = normal(rng);
    auto encoded = common::encode_delta(*model, encoding);
    if (!encoded) return encoded.error();
    return std::move(encoded->bytes);
}

// One WU: ask, and upload the made-up result for the unit given.
void one_unit(Volunteer& v, const common::Bytes& delta, ThreadTally& tally) {
    common::WorkRequest request;
    request.client_id = v.api->client_id();
    request.device = {"cpu", "dispatch bench", 8 * common::kGiB, 1};
    request.samples_per_s = 1000;
    auto started = Clock::now();
    auto response = v.api->request_work(request);
    tally.work_ms.push_back(milliseconds_since(started));
    if (!response) return tally.fail("work: " + response.message());
    if (!response->has_work) {
        ++tally.no_work;
        return;
    }
    auto unit = common::parse_message<common::WorkUnit>(response->work_unit.payload);
    if (!unit) return tally.fail("work unit: " + unit.message());
    auto samples = unit->hyper.local_steps * unit->hyper.batch_size;
    common::TrainMetrics metrics{1.0, 0.9, samples, 1.0, static_cast<double>(samples)};
    auto packed = common::pack_result_of(*unit, unit->client_id, delta, metrics, "cpu:dispatch bench");
    auto upload_started = Clock::now();
    auto uploaded = v.api->upload_result(std::string(packed.begin(), packed.end()));
    tally.upload_ms.push_back(milliseconds_since(upload_started));
    if (!uploaded) return tally.fail("upload: " + uploaded.message());
    tally.unit_ms.push_back(milliseconds_since(started));
    ++tally.units;
}

// Runs `body(thread_index)` on `threads` threads and waits for them.
template <class Body>
void on_threads(int threads, Body body) {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&body, t] {
            pthread_setname_np(pthread_self(), "bench-client");  // profiles tell client from server
            body(t);
        });
    for (auto& thread : pool) thread.join();
}

// The benchmark's task in a fresh state directory: fedbuff, tiny top-k results, and every
// check a made-up delta would trip or that costs more than the front end turned off.
common::Status create_bench_task(const DispatchBenchOptions& options, const server::StateDir& state) {
    if (auto token = server::initialize_state(state); !token) return token.error();
    auto store = server::Store::connect(state.database_url(), false);
    if (!store) return store.error();
    auto config = server::default_task_config(options.data, server::PolicyKind::FedBuff, options.model);
    if (!config) return config.error();
    config->codec = {common::DeltaDType::Int8, options.topk_fraction};
    config->loss_check = 0;  // the front end is measured here; `ingest` measures validation
    accept_made_up_results(*config);  // every result is the same made-up delta
    // The curve's evaluations and the gallery's samples are a fixed background cost that
    // does not grow with the load: one evaluation an hour, no gallery.
    config->eval_interval_s = 3600;
    config->merge.buffer_size = 64;
    config->eval_full_interval_s = 3600;
    if (auto task = server::create_task(state, **store, *config); !task) return task.error();
    return {};
}

common::Result<std::vector<std::unique_ptr<ServerApp>>> start_servers(const DispatchBenchOptions& options,
                                                                      const server::StateDir& state) {
    server::ServerOptions server_options;
    server_options.state = state;
    server_options.http.address = "127.0.0.1";
    server_options.http.port = 0;
    server_options.handler_threads = options.handler_threads;
    server_options.validation_threads = options.validation_threads;
    server_options.work_threads = options.work_threads;
    server_options.registrations_per_hour = 0;  // thousands of volunteers from one address
    server_options.sample_renderer = [](const server::TaskConfig&) {
        return std::optional<server::SampleRendererFactory>();
    };
    std::vector<std::unique_ptr<ServerApp>> apps;
    for (int i = 0; i < options.servers; ++i) {
        auto app = ServerApp::start(server_options);
        if (!app) return app.error();
        apps.push_back(std::move(*app));
    }
    return apps;
}

// New keys registered over `connections` threads, spread over the servers evenly.
common::Result<std::vector<Volunteer>> register_volunteers(const DispatchBenchOptions& options,
                                                           const std::vector<std::unique_ptr<ServerApp>>& apps,
                                                           client::HttpClient& http) {
    std::vector<client::Url> urls;
    for (const auto& app : apps) {
        auto url = client::parse_url("http://127.0.0.1:" + std::to_string(app->port()));
        if (!url) return url.error();
        urls.push_back(*url);
    }
    std::vector<Volunteer> volunteers;
    volunteers.reserve(static_cast<std::size_t>(options.volunteers));
    for (std::int64_t i = 0; i < options.volunteers; ++i) {
        volunteers.push_back({common::SigningKey::generate(), nullptr});
        const auto& url = urls[static_cast<std::size_t>(i) % urls.size()];
        volunteers.back().api = std::make_unique<client::ServerApi>(url, http, volunteers.back().key);
    }
    std::atomic<int> failures{0};
    std::string first_failure;
    std::mutex failure_mutex;
    on_threads(options.connections, [&](int t) {
        for (std::size_t i = static_cast<std::size_t>(t); i < volunteers.size();
             i += static_cast<std::size_t>(options.connections)) {
            auto response = volunteers[i].api->register_client("bench " + std::to_string(i), "bench");
            if (!response) {
                std::lock_guard lock(failure_mutex);
                if (failures++ == 0) first_failure = response.message();
                continue;
            }
            volunteers[i].api->set_client_id(response->client_id);
        }
    });
    if (failures > 0) return common::make_error("registration failed: " + first_failure);
    return volunteers;
}

// Each thread asks for and returns units for its share of the volunteers, in turn, until the
// deadline: every thread's tally in one.
ThreadTally measure(const DispatchBenchOptions& options, std::vector<Volunteer>& volunteers,
                    const common::Bytes& delta) {
    std::vector<ThreadTally> tallies(static_cast<std::size_t>(options.connections));
    auto deadline = Clock::now() + std::chrono::duration<double>(options.seconds);
    on_threads(options.connections, [&](int t) {
        auto& tally = tallies[static_cast<std::size_t>(t)];
        for (auto i = static_cast<std::size_t>(t); Clock::now() < deadline;) {
            one_unit(volunteers[i], delta, tally);
            i += static_cast<std::size_t>(options.connections);
            if (i >= volunteers.size()) i = static_cast<std::size_t>(t) % volunteers.size();
        }
    });
    ThreadTally all;
    for (auto& tally : tallies) {
        all.work_ms.insert(all.work_ms.end(), tally.work_ms.begin(), tally.work_ms.end());
        all.upload_ms.insert(all.upload_ms.end(), tally.upload_ms.begin(), tally.upload_ms.end());
        all.unit_ms.insert(all.unit_ms.end(), tally.unit_ms.begin(), tally.unit_ms.end());
        all.units += tally.units;
        all.no_work += tally.no_work;
        if (tally.failures > 0 && all.failures == 0) all.first_failure = tally.first_failure;
        all.failures += tally.failures;
    }
    return all;
}

DispatchFigures figures_of(const ThreadTally& all, double elapsed_s, const server::DatabaseActivity& before,
                           const server::DatabaseActivity& after) {
    DispatchFigures figures;
    figures.seconds = elapsed_s;
    figures.units = all.units;
    figures.no_work = all.no_work;
    figures.failures = all.failures;
    figures.first_failure = all.first_failure;
    figures.units_per_s = static_cast<double>(all.units) / elapsed_s;
    figures.work_p50_ms = percentile(all.work_ms, 0.5);
    figures.work_p99_ms = percentile(all.work_ms, 0.99);
    figures.upload_p50_ms = percentile(all.upload_ms, 0.5);
    figures.upload_p99_ms = percentile(all.upload_ms, 0.99);
    figures.unit_p50_ms = percentile(all.unit_ms, 0.5);
    figures.unit_p99_ms = percentile(all.unit_ms, 0.99);
    auto per_unit = [&](std::uint64_t count) {
        return all.units > 0 ? static_cast<double>(count) / static_cast<double>(all.units) : 0.0;
    };
    figures.statements_per_unit = per_unit(after.statements - before.statements);
    figures.reads_per_unit = per_unit(after.reads - before.reads);
    figures.commits_per_unit = per_unit(after.commits - before.commits);
    return figures;
}

void print_figures(const DispatchBenchOptions& options, const DispatchFigures& figures, double drain_s,
                   std::ostream& out) {
    char line[1024];
    std::snprintf(
        line, sizeof line,
        "dispatch: %d server%s, %lld volunteers, %d connections (kept alive %d s), %zu validation threads, %.1f s: "
        "%.1f WU/s "
        "(%lld units, %lld no-work answers, %lld failures)\n"
        "  work   p50 %.1f ms  p99 %.1f ms\n"
        "  upload p50 %.1f ms  p99 %.1f ms (%zu-byte results)\n"
        "  unit   p50 %.1f ms  p99 %.1f ms (ask + upload)\n"
        "  registered %lld volunteers in %.1f s (%.0f/s); draining validation and merges at stop took %.1f s\n"
        "  database: %.1f statements (%.1f reads) and %.1f commits per unit (its work request, upload, validation and "
        "merge)\n",
        options.servers, options.servers > 1 ? "s" : "", static_cast<long long>(options.volunteers),
        options.connections, options.keep_alive_s, options.validation_threads, figures.seconds, figures.units_per_s,
        static_cast<long long>(figures.units), static_cast<long long>(figures.no_work),
        static_cast<long long>(figures.failures), figures.work_p50_ms, figures.work_p99_ms, figures.upload_p50_ms,
        figures.upload_p99_ms, figures.result_bytes, figures.unit_p50_ms, figures.unit_p99_ms,
        static_cast<long long>(options.volunteers), figures.register_s,
        static_cast<double>(options.volunteers) / figures.register_s, drain_s, figures.statements_per_unit,
        figures.reads_per_unit, figures.commits_per_unit);
    out << line;
}

}  // namespace

common::Result<DispatchFigures> run_dispatch_bench(const DispatchBenchOptions& options, std::ostream& out) {
    if (options.volunteers < 1 || options.connections < 1 || !(options.seconds > 0) || options.servers < 1)
        return common::make_error("--volunteers, --connections, --servers and --seconds must be positive");
    if (options.servers > 1 && !server::is_postgres_url(options.database_url))
        return common::make_error("several --servers share a PostgreSQL database: give --db postgresql://…");
    auto dir = std::filesystem::temp_directory_path() / ("tessera-dispatch-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    server::StateDir state(dir, options.database_url);
    if (auto created = create_bench_task(options, state); !created) return created.error();
    auto apps = start_servers(options, state);
    if (!apps) return apps.error();
    auto& first = *apps->front();
    auto delta = made_up_delta(first.store(), state, {common::DeltaDType::Int8, options.topk_fraction});
    if (!delta) return delta.error();

    client::HttpOptions http_options;
    http_options.keep_alive = std::chrono::seconds(options.keep_alive_s);
    client::HttpClient http(http_options);
    auto registering = Clock::now();
    auto volunteers = register_volunteers(options, *apps, http);
    if (!volunteers) return volunteers.error();
    double register_s = milliseconds_since(registering) / 1000;

    auto measuring = Clock::now();
    auto activity_before = server::database_activity();
    auto all = measure(options, *volunteers, *delta);
    double elapsed_s = milliseconds_since(measuring) / 1000;
    auto activity_after = server::database_activity();

    auto counts = first.store().counts(0);
    auto draining = Clock::now();
    for (auto& app : *apps) app->stop();
    double drain_s = milliseconds_since(draining) / 1000;

    auto figures = figures_of(all, elapsed_s, activity_before, activity_after);
    figures.register_s = register_s;
    figures.result_bytes = delta->size();
    print_figures(options, figures, drain_s, out);
    if (counts) {
        out << "  at the end of the measurement:";
        for (const auto& [state_name, count] : counts->assignments) out << " " << state_name << " " << count;
        out << "\n";
    }
    if (all.failures > 0) out << "  first failure: " << all.first_failure << "\n";
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return figures;
}

int run_dispatch_command(int argc, char** argv) {
    cxxopts::Options parser("tessera-bench dispatch", "Work units per second one server hands out and takes back");
    DispatchBenchOptions defaults;
    parser.add_options()("data", "a prepared dataset directory (tessera-data prepare)", cxxopts::value<std::string>())(
        "volunteers", "volunteers registered",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.volunteers)))(
        "connections", "volunteers active at once",
        cxxopts::value<int>()->default_value(std::to_string(defaults.connections)))(
        "seconds", "measured seconds", cxxopts::value<double>()->default_value("20"))(
        "topk", "fraction of each tensor in the made-up results", cxxopts::value<double>()->default_value("0.001"))(
        "model", "model preset", cxxopts::value<std::string>()->default_value(defaults.model))(
        "handler-threads", "the server's handler threads", cxxopts::value<std::size_t>()->default_value("4"))(
        "validation-threads", "the server's validation threads",
        cxxopts::value<std::size_t>()->default_value(std::to_string(defaults.validation_threads)))(
        "work-threads", "the server's work threads (loss checks, evaluations)",
        cxxopts::value<std::size_t>()->default_value(std::to_string(defaults.work_threads)))(
        "db", "the server's database: an empty postgresql://… database (default: SQLite in a temporary directory)",
        cxxopts::value<std::string>()->default_value(""))(
        "servers", "server instances on the --db PostgreSQL database, the volunteers spread over them",
        cxxopts::value<int>()->default_value("1"))(
        "keep-alive", "seconds a volunteer's answered connection is kept for its next request (0: one per request)",
        cxxopts::value<int>()->default_value(std::to_string(defaults.keep_alive_s)));
    try {
        auto parsed = common::parse_command_line(parser, argc, argv);
        if (!parsed) return parsed.exit_code;
        const auto& args = *parsed;
        if (!args.count("data")) {
            std::cerr << "tessera-bench dispatch: needs --data DIR\n";
            return 2;
        }
        DispatchBenchOptions options;
        options.data = args["data"].as<std::string>();
        options.volunteers = args["volunteers"].as<std::int64_t>();
        options.connections = args["connections"].as<int>();
        options.seconds = args["seconds"].as<double>();
        options.topk_fraction = args["topk"].as<double>();
        options.model = args["model"].as<std::string>();
        options.handler_threads = args["handler-threads"].as<std::size_t>();
        options.validation_threads = std::max<std::size_t>(1, args["validation-threads"].as<std::size_t>());
        options.work_threads = std::max<std::size_t>(1, args["work-threads"].as<std::size_t>());
        options.database_url = args["db"].as<std::string>();
        options.servers = args["servers"].as<int>();
        options.keep_alive_s = std::max(0, args["keep-alive"].as<int>());
        auto figures = run_dispatch_bench(options, std::cout);
        if (!figures) {
            std::cerr << "tessera-bench dispatch: " << figures.message() << "\n";
            return 1;
        }
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench dispatch: " << error.what() << "\n";
        return 2;
    }
    return 0;
}

}  // namespace tessera::bench
