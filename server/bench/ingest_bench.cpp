// The ingest benchmark: results through the server's pipeline, then the merge loop alone
// against a triad over the same number of floats.
#include "ingest_bench.h"

#include <boost/json.hpp>
#include <cxxopts.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>

#include "bytes.h"
#include "command_line.h"
#include "database.h"
#include "delta_codec.h"
#include "in_process_server.h"
#include "result_files.h"
#include "made_up_results.h"
#include "merge_policy.h"
#include "result_upload.h"
#include "signed_envelope.h"
#include "task_setup.h"

namespace tessera::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::int64_t parameters_of(const common::NamedTensors& tensors) {
    std::int64_t n = 0;
    for (const auto& t : tensors) n += static_cast<std::int64_t>(t.values.size());
    return n;
}

// One thread's a[i] = b[i] + s·c[i] over n floats: the best of five, in bytes/s (12 bytes per
// element: two reads, one write), as STREAM counts it.
double triad_bytes_per_s(std::size_t n) {
    std::vector<float> a(n, 0.f), b(n, 1.f), c(n, 2.f);
    double best = 0;
    volatile float sink = 0;
    for (int repeat = 0; repeat < 5; ++repeat) {
        auto started = Clock::now();
        const float s = 0.5f + static_cast<float>(repeat);
        for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
        best = std::max(best, 12.0 * static_cast<double>(n) / seconds_since(started));
        sink = sink + a[n / 2];
    }
    return best;
}

// Deltas of the model's shapes with small random values, encoded as `encoding` asks.
common::Result<std::vector<common::Bytes>> made_up_deltas(const common::NamedTensors& model, int count,
                                                          const common::DeltaEncoding& encoding) {
    std::vector<common::Bytes> deltas;
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0, 1e-3f);
    for (int i = 0; i < count; ++i) {
        auto delta = model;
        for (auto& tensor : delta)
            for (auto& value : tensor.values) value = normal(rng);
        auto encoded = common::encode_delta(delta, encoding);
        if (!encoded) return encoded.error();
        deltas.push_back(std::move(encoded->bytes));
    }
    return deltas;
}

common::Bytes packed_result(const common::WorkUnit& unit, const common::Bytes& delta) {
    auto samples = unit.hyper.local_steps * unit.hyper.batch_size;
    common::TrainMetrics metrics{1.0, 0.9, samples, 1.0, static_cast<double>(samples)};
    return common::pack_result_of(unit, unit.client_id, delta, metrics, "cpu:ingest bench");
}

// The pipeline: ask for a unit, upload its result (intake, validation, merge, commit).
struct PipelineFigures {
    double seconds = 0;
    std::int64_t refused = 0;   // at intake
    std::int64_t merged = 0;    // by the end
    std::int64_t rejected = 0;  // by validation
    std::int64_t version = 0;
    double aggregator_s = 0;  // merging and committing, on the aggregator's thread
    server::DatabaseActivity work;     // summed over the work requests
    server::DatabaseActivity results;  // summed over the uploads, each up to its merge
    std::uint64_t decodes = 0;         // delta files decoded over the uploads
};

// What the database ran between `before` and now, added to `sum`.
void add_activity_since(const server::DatabaseActivity& before, server::DatabaseActivity& sum) {
    auto now = server::database_activity();
    sum.statements += now.statements - before.statements;
    sum.reads += now.reads - before.reads;
    sum.commits += now.commits - before.commits;
}

std::uint64_t directory_bytes(const std::filesystem::path& dir) {
    std::uint64_t bytes = 0;
    std::error_code error;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir, error))
        if (entry.is_regular_file(error)) bytes += entry.file_size(error);
    return bytes;
}

common::Result<PipelineFigures> run_pipeline(server::InProcessServer& server, const std::vector<common::Bytes>& deltas,
                                             std::int64_t results) {
    constexpr int kVolunteers = 4;
    std::vector<std::string> ids;
    for (int i = 0; i < kVolunteers; ++i) {
        auto client = server.register_volunteer("ingest " + std::to_string(i));
        if (!client) return client.error();
        ids.push_back(client->id);
    }
    std::vector<std::string> held(kVolunteers);  // each volunteer's model, so units offer patches
    PipelineFigures figures;
    auto started = Clock::now();
    for (std::int64_t i = 0; i < results; ++i) {
        auto volunteer = static_cast<std::size_t>(i % kVolunteers);
        common::WorkRequest request;
        request.client_id = ids[volunteer];
        request.device = {"cpu", "ingest bench", 8 * common::kGiB, 1};
        request.samples_per_s = 1000;
        request.held_model = held[volunteer];
        auto asked = server::database_activity();
        auto response = server.request_work(request);
        add_activity_since(asked, figures.work);
        if (!response) return response.error();
        if (!response->has_work) return common::make_error("the server had no work for result " + std::to_string(i));
        auto payload = common::open_envelope(response->work_unit, common::kWorkUnitPurpose, server.verify_key());
        if (!payload) return payload.error();
        auto unit = common::parse_message<common::WorkUnit>(*payload);
        if (!unit) return unit.error();
        held[volunteer] = unit->model_blob.sha256;
        auto body = packed_result(*unit, deltas[static_cast<std::size_t>(i) % deltas.size()]);
        auto uploaded = server::database_activity();
        auto decoded = server::result_deltas_decoded();
        auto outcome = server.upload(request.client_id, body);
        add_activity_since(uploaded, figures.results);
        figures.decodes += server::result_deltas_decoded() - decoded;
        if (!outcome) return outcome.error();
        if (outcome->http_status != 200) ++figures.refused;
    }
    figures.seconds = seconds_since(started);
    figures.version = server.version();
    figures.aggregator_s = server.merge_seconds();
    auto merged = server.store().in_state(server::AssignmentState::Merged);
    auto rejected = server.store().in_state(server::AssignmentState::Rejected);
    if (!merged) return merged.error();
    if (!rejected) return rejected.error();
    figures.merged = static_cast<std::int64_t>(merged->size());
    figures.rejected = static_cast<std::int64_t>(rejected->size());
    return figures;
}

// The policy's add over the model, `repeats` times: seconds per add.
common::Result<double> merge_loop_seconds(const server::TaskConfig& config, common::NamedTensors model,
                                          const common::Bytes& delta_file, int repeats) {
    auto decoded = common::decode_delta(delta_file);
    if (!decoded) return decoded.error();
    auto settings = config.merge;
    settings.kind = server::PolicyKind::FedAsync;  // one add = one step over the whole model
    auto policy = server::make_merge_policy(settings);
    if (!policy) return policy.error();
    double best = 1e30;
    for (int i = 0; i < repeats; ++i) {
        server::IncomingDelta incoming{"r" + std::to_string(i), 0, decoded->tensors};
        auto started = Clock::now();
        auto outcome = (*policy)->add(model, std::move(incoming));
        double seconds = seconds_since(started);
        if (!outcome) return outcome.error();
        best = std::min(best, seconds);
    }
    return best;
}

// The measured task: int8 results, no replication, and every check a made-up delta would trip
// turned off (the fleet simulator measures the checks on trained deltas).
common::Result<server::TaskConfig> ingest_task_config(const IngestBenchOptions& options) {
    auto policy = server::policy_from_name(options.policy);
    if (!policy) return common::make_error("unknown policy '" + options.policy + "'");
    auto config = server::default_task_config(options.data, *policy, options.model);
    if (!config) return config.error();
    config->codec = {common::DeltaDType::Int8, 1.0};
    auto patches = server::parse_patch_codec(options.patches);
    if (!patches) return patches.error();
    config->patches = *patches;
    config->loss_check = options.loss_check;
    accept_made_up_results(*config);  // four made-up deltas, reused
    config->target_seconds = 0;
    if (options.buffer > 0) config->merge.buffer_size = options.buffer;
    return config;
}

void print_ingest(std::ostream& out, const IngestBenchOptions& options, bool patched, const IngestFigures& figures,
                  double aggregator_ms_per_merge) {
    auto cadence = (patched ? "patches " + options.patches + ", a checkpoint every " +
                                  std::to_string(options.checkpoint_every) + " versions"
                            : std::string("patches off, every version a checkpoint")) +
                   ", keep " + (options.keep_checkpoints > 0 ? std::to_string(options.keep_checkpoints) : "all");
    auto buffer = options.buffer > 0 ? " K=" + std::to_string(options.buffer) : std::string();
    char text[1024];
    std::snprintf(text, sizeof text,
                  "ingest: %s int8, %.1f M parameters, %.2f MB per result, %s%s, loss check %.2f, %s\n"
                  "  pipeline: %lld results in %.1f s = %.2f results/s validated and merged "
                  "(%lld merged, %lld rejected, %lld refused at intake; version %lld)\n"
                  "  aggregator: %.0f ms per result merged and committed = %.2f merges/s\n"
                  "  database: %.1f statements (%.1f reads) per work request; %.1f statements (%.1f reads) "
                  "per result, intake to merge; %.2f delta decodes per result\n"
                  "  state directory: %.1f MB of blobs and result files\n"
                  "  merge loop: %.1f ms per add = %.2f GB/s (12 bytes per parameter: Δ read, θ read and written)\n"
                  "  memory bandwidth (triad, one thread, 3 arrays of max(parameters, 16 M) floats): %.2f GB/s; "
                  "merge loop at %.0f %% of it\n",
                  options.model.c_str(), static_cast<double>(figures.parameters) / 1e6,
                  static_cast<double>(figures.result_bytes) / 1e6, options.policy.c_str(), buffer.c_str(),
                  options.loss_check, cadence.c_str(), static_cast<long long>(options.results), figures.pipeline_s,
                  figures.results_per_s, static_cast<long long>(figures.merged),
                  static_cast<long long>(figures.rejected), static_cast<long long>(figures.refused),
                  static_cast<long long>(figures.version), aggregator_ms_per_merge, figures.merges_per_s,
                  figures.work_statements, figures.work_reads, figures.result_statements, figures.result_reads,
                  figures.decodes_per_result, static_cast<double>(figures.state_bytes) / 1e6, figures.merge_s * 1000,
                  figures.merge_bytes_per_s / 1e9, figures.memory_bytes_per_s / 1e9,
                  100.0 * figures.merge_bytes_per_s / figures.memory_bytes_per_s);
    out << text;
}

}  // namespace

common::Result<IngestFigures> run_ingest_bench(const IngestBenchOptions& options, std::ostream& out) {
    if (options.results < 1) return common::make_error("--results must be positive");
    auto config = ingest_task_config(options);
    if (!config) return config.error();
    auto dir = std::filesystem::temp_directory_path() / ("tessera-ingest-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::int64_t now = 1'800'000'000;
    auto server = server::InProcessServer::create(server::StateDir(dir, options.database_url), *config,
                                                  [&now] { return now; }, 1,
                                                  {options.checkpoint_every, options.keep_checkpoints});
    if (!server) return server.error();
    auto model = (*server)->model(0);
    if (!model) return model.error();
    auto parameters = parameters_of(**model);
    auto deltas = made_up_deltas(**model, 4, config->codec);
    if (!deltas) return deltas.error();

    auto pipeline = run_pipeline(**server, *deltas, options.results);
    if (!pipeline) return pipeline.error();
    auto state_bytes = directory_bytes(dir / "blobs") + directory_bytes(dir / "results");
    auto merge_s = merge_loop_seconds((*server)->config(), **model, deltas->front(), 5);
    if (!merge_s) return merge_s.error();
    // Arrays of at least 64 MB each, so the triad measures memory and not a cache.
    double triad = triad_bytes_per_s(std::max<std::size_t>(static_cast<std::size_t>(parameters), 16 * common::kMiB));
    IngestFigures figures;
    figures.parameters = parameters;
    figures.result_bytes = deltas->front().size();
    figures.pipeline_s = pipeline->seconds;
    figures.results_per_s = static_cast<double>(options.results) / pipeline->seconds;
    figures.merged = pipeline->merged;
    figures.rejected = pipeline->rejected;
    figures.refused = pipeline->refused;
    figures.version = pipeline->version;
    auto per_request = [&options](std::uint64_t sum) {
        return static_cast<double>(sum) / static_cast<double>(options.results);
    };
    figures.work_statements = per_request(pipeline->work.statements);
    figures.work_reads = per_request(pipeline->work.reads);
    figures.result_statements = per_request(pipeline->results.statements);
    figures.result_reads = per_request(pipeline->results.reads);
    figures.decodes_per_result = per_request(pipeline->decodes);
    figures.merges_per_s = static_cast<double>(pipeline->merged) / std::max(1e-9, pipeline->aggregator_s);
    figures.state_bytes = state_bytes;
    figures.merge_s = *merge_s;
    figures.merge_bytes_per_s = 12.0 * static_cast<double>(parameters) / *merge_s;
    figures.memory_bytes_per_s = triad;
    print_ingest(out, options, config->patches.has_value(), figures,
                 1000 * pipeline->aggregator_s / static_cast<double>(std::max<std::int64_t>(1, pipeline->merged)));
    server->reset();
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
    return figures;
}

int run_ingest_command(int argc, char** argv) {
    cxxopts::Options parser("tessera-bench ingest", "Results per second through validation and merging");
    IngestBenchOptions defaults;
    parser.add_options()("data", "a prepared dataset directory (tessera-data prepare)", cxxopts::value<std::string>())(
        "model", "model preset", cxxopts::value<std::string>()->default_value(defaults.model))(
        "results", "results uploaded", cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.results)))(
        "policy", "fedasync, fedbuff or diloco", cxxopts::value<std::string>()->default_value(defaults.policy))(
        "buffer", "K for fedbuff and diloco (0: the policy's default)",
        cxxopts::value<std::int64_t>()->default_value("0"))(
        "loss-check", "fraction of results given the held-out loss check",
        cxxopts::value<double>()->default_value("0"))("patch-codec", "downlink patches: off, bf16, int8, int4 or int2",
                                                      cxxopts::value<std::string>()->default_value(defaults.patches))(
        "checkpoint-every", "with patches: a full checkpoint every N versions",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.checkpoint_every)))(
        "keep-checkpoints", "retention: the newest N checkpoints keep their files; 0: every version's",
        cxxopts::value<std::int64_t>()->default_value(std::to_string(defaults.keep_checkpoints)))(
        "db", "the server's database: an empty postgresql://… database (default: SQLite in a temporary directory)",
        cxxopts::value<std::string>()->default_value(""));
    try {
        auto parsed = common::parse_command_line(parser, argc, argv);
        if (!parsed) return parsed.exit_code;
        const auto& args = *parsed;
        if (!args.count("data")) {
            std::cerr << "tessera-bench ingest: needs --data DIR\n";
            return 2;
        }
        IngestBenchOptions options;
        options.data = args["data"].as<std::string>();
        options.model = args["model"].as<std::string>();
        options.results = args["results"].as<std::int64_t>();
        options.policy = args["policy"].as<std::string>();
        options.buffer = args["buffer"].as<std::int64_t>();
        options.loss_check = args["loss-check"].as<double>();
        options.patches = args["patch-codec"].as<std::string>();
        options.checkpoint_every = args["checkpoint-every"].as<std::int64_t>();
        options.keep_checkpoints = args["keep-checkpoints"].as<std::int64_t>();
        options.database_url = args["db"].as<std::string>();
        auto figures = run_ingest_bench(options, std::cout);
        if (!figures) {
            std::cerr << "tessera-bench ingest: " << figures.message() << "\n";
            return 1;
        }
    } catch (const cxxopts::exceptions::exception& error) {
        std::cerr << "tessera-bench ingest: " << error.what() << "\n";
        return 2;
    }
    return 0;
}

}  // namespace tessera::bench
