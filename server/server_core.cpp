// ServerCore: building the components, serving the tasks, stopping in order.
#include "server_core.h"

#include <algorithm>
#include <random>

#include "database.h"
#include "dataset_manifest.h"
#include "doorbell.h"
#include "executor.h"
#include "expert_group.h"
#include "gallery_sources.h"
#include "file_io.h"
#include "logger.h"
#include "process_holder.h"
#include "result_intake.h"
#include "task_lookup.h"
#include "trust.h"
#include "torch_model.h"
#include "torch_prompts.h"
#include "work_pool.h"

namespace tessera::server {

struct ServerCore::Parts {
    ServerOptions options;
    std::unique_ptr<Store> store;
    std::unique_ptr<common::SigningKey> key;
    std::unique_ptr<BlobStore> blobs;
    std::unique_ptr<ResultFiles> results;
    std::unique_ptr<PublishedModels> published;
    std::unique_ptr<CatchUpPatches> catch_up;
    std::unique_ptr<ModelCache> models;
    ProbePools probe_pools;  // the served tasks'
    CopyDetector copies;
    DeltaCaps delta_caps;  // the served tasks'
    ServerMetrics metrics;
    std::unique_ptr<WorkPool> work;
    std::unique_ptr<WorkPool> validations;  // the validation stage's threads
    Executor executor;                      // the work pool's
    Executor curve_executor;   // the dashboard's loss curve: the work pool, or nowhere
    std::string process_name;  // in the leases it holds
    Doorbell accepted;         // rung by the validator, heard by each task's aggregator election
    std::unique_ptr<TaskRuntimes> tasks;
    std::unique_ptr<Validator> validator;
    std::unique_ptr<ValidationStage> validation;
    std::unique_ptr<Transitioner> transitioner;
    std::unique_ptr<Scheduler> scheduler;
    std::unique_ptr<ResultIntake> intake;
    std::unique_ptr<VolunteerService> volunteers;
    bool stopped = false;

    // On a failed start too: no pool thread may outlive the components its jobs use.
    ~Parts() {
        if (validation) validation->stop();
        if (validations) validations->join();
        if (work) work->join();
        if (tasks) tasks->stop();
    }
};

namespace {

constexpr std::size_t kGalleryVersionsKept = 4;  // the dashboard's sample grids

// LibTorch probes on the validation shard named by the task's dataset.json.
common::Result<ModelProbeFactory> torch_probes_for(const TaskConfig& config) {
    std::filesystem::path dir = config.data_dir;
    auto manifest = common::load_dataset_manifest(dir / "dataset.json");
    if (!manifest) return manifest.error();
    return make_torch_probe_factory(config, dir / manifest->validation.file);
}

// LibTorch sampling through the decoder named by the task's dataset.json, when it has one.
std::optional<SampleRendererFactory> torch_renderer_for(const TaskConfig& config,
                                                        const common::Result<common::DatasetManifest>& manifest) {
    if (!manifest || manifest->decoder.file.empty()) return std::nullopt;
    auto decoder = std::filesystem::path(config.data_dir) / manifest->decoder.file;
    return make_torch_sample_renderer_factory(config, decoder, manifest->scale_factor,
                                              std::filesystem::path(config.data_dir) / manifest->validation.file);
}

// What the dashboard shows of a task, and its samples: images when the model can draw.
std::shared_ptr<TaskFacts> task_facts(ServerCore::Parts& p, const TaskView& task, std::int64_t parameters) {
    auto facts = std::make_shared<TaskFacts>();
    facts->parameters = parameters;
    const auto& config = task.config;
    auto manifest = common::load_dataset_manifest(std::filesystem::path(config.data_dir) / "dataset.json");
    if (manifest) {
        facts->classes = manifest->classes;
        facts->validation_set_samples = manifest->validation.samples;
        // A text model's gallery rows are the validation shard's first captions.
        if (config.text_dim > 0) facts->classes = gallery_captions(config.data_dir, *manifest, kGalleryCaptions);
    }
    bool group_router = !config.expert_group.empty() && config.expert_index == kRouterIndex;
    auto renderer = p.options.sample_renderer ? p.options.sample_renderer(config)
                    : group_router ? group_renderer_for(*p.store, *p.blobs, *p.models, config, manifest, *facts)
                                   : torch_renderer_for(config, manifest);
    // A text task's prompts on the dashboard, drawn by the gallery from the same weights.
    std::optional<TorchPrompts> prompts;
    if (renderer && manifest && config.text_dim > 0 && !p.options.sample_renderer) {
        auto made = make_torch_prompts(config, *manifest);
        if (made) {
            prompts = std::move(*made);
        } else {
            facts->prompts_error = made.message();
            common::process_log().error("samples", "task " + task.record.id + ": prompts: " + made.message());
        }
    }
    if (renderer) {
        facts->samples_kind = "images";
        // Samples from the EMA of the versions where the task keeps one, as PixArt-α and AT-1 do.
        auto weights = config.ema_decay > 0 ? ema_weights(*p.store, *p.blobs, *p.models, task.record.id)
                                            : published_weights(*p.models, task.record.id);
        facts->gallery =
            std::make_shared<SampleGallery>(std::move(weights), std::move(*renderer), p.executor, kGalleryVersionsKept,
                                            prompts ? prompts->renderer : PromptRendererFactory());
        if (prompts) facts->prompts = prompts->book;
    } else {
        facts->samples_kind = config.model == "cnn" ? "accuracy" : "none";  // the classifier preset
    }
    return facts;
}

AggregatorHooks aggregator_hooks(ServerCore::Parts& p) {
    auto* raw = &p;
    AggregatorHooks hooks;
    hooks.merge_timer = [raw](double seconds) { raw->metrics.observe_merge(seconds); };
    hooks.commit_failed = [raw] { raw->metrics.count_commit_failure(); };
    hooks.retry_s = p.options.merge_retry_s;
    hooks.checkpoint_every = p.options.checkpoint_every;
    hooks.checkpoint_interval_s = p.options.checkpoint_interval_s;
    hooks.checkpoint_at_stop = p.options.checkpoint_at_stop;
    hooks.keep_checkpoints = p.options.keep_checkpoints;
    hooks.model_committed = [raw](const std::string& task_id, std::int64_t version, const common::NamedTensors& model) {
        raw->copies.note_model(task_id, version, model);
        raw->models->put(task_id, version, model);  // the base of the next units' results
    };
    return hooks;
}

// A task this process starts serving: its probes, its facts, and its aggregator when this
// process gets the task's lease.
common::Result<std::shared_ptr<TaskRuntime>> start_task(ServerCore::Parts& p, const TaskView& task) {
    auto* raw = &p;
    const auto& id = task.record.id;
    auto runtime = std::make_shared<TaskRuntime>();
    runtime->task = task;
    auto factory = p.options.probe_factory ? p.options.probe_factory(task.config) : torch_probes_for(task.config);
    if (!factory) return factory.error();
    runtime->probes =
        std::make_shared<ProbePool>(std::move(*factory), std::max<std::size_t>(1, p.options.work_threads));
    auto model = p.models->get(id, task.record.version);
    if (!model) return model.error();
    auto parameters = value_count(**model);
    runtime->facts = task_facts(p, task, parameters);
    ElectionSettings election{p.process_name, p.options.aggregator_lease_s,
                              std::chrono::milliseconds(p.options.election_poll_ms)};
    auto probes = runtime->probes;
    auto make_aggregator = [raw, probes, hooks = aggregator_hooks(p)](const LeaseClaim& fence) {
        auto fenced = hooks;
        fenced.fence = fence;
        return std::make_unique<Aggregator>(*raw->store, *raw->blobs, *raw->published, *raw->results, probes,
                                            raw->curve_executor, raw->options.clock, std::move(fenced));
    };
    // While another process aggregates, the copy detector still sees each new version.
    auto follow = [raw](const std::string& task_id, std::int64_t version) {
        auto model = raw->models->get(task_id, version);
        if (model) raw->copies.note_model(task_id, version, **model);
    };
    runtime->aggregator =
        std::make_unique<AggregatorElection>(*p.store, *p.store, *p.store, p.accepted, p.options.clock,
                                             std::move(make_aggregator), std::move(election), std::move(follow));
    p.probe_pools.add(id, runtime->probes);
    if (auto status = runtime->aggregator->start(id); !status) {
        p.probe_pools.remove(id);
        return status.error();
    }
    p.delta_caps.set(id, max_delta_bytes_for(parameters));
    return runtime;
}

void stop_task(ServerCore::Parts& p, TaskRuntime& runtime) {
    runtime.aggregator->stop();
    p.probe_pools.remove(runtime.task.record.id);
    p.delta_caps.remove(runtime.task.record.id);
}

common::Status open_state(ServerCore::Parts& p, FileSystem& files) {
    const auto& state = p.options.state;
    auto store = Store::connect(state.database_url(), false);
    if (!store) return store.error();
    p.store = std::move(*store);
    auto key = common::SigningKey::load_pem(state.signing_key());
    if (!key) return common::with_context("server key", key.error());
    p.key = std::make_unique<common::SigningKey>(std::move(*key));
    if (auto made = files.make_directories(state.results()); !made) return made.error();
    // On a shared database the other processes may be writing files this one cannot see yet.
    auto spare = is_postgres_url(state.database_url()) ? std::chrono::hours(1) : std::chrono::hours(0);
    if (auto removed = remove_orphan_files(*p.store, state, files, spare); !removed)
        return removed.error();
    else if (*removed)
        common::process_log().info("orphans_removed", "removed " + std::to_string(*removed) + " orphan files");
    return {};
}

}  // namespace

common::Result<std::size_t> remove_orphan_files(Store& store, const StateDir& state, FileSystem& files,
                                                std::chrono::seconds spare_younger_than) {
    auto blobs = store.referenced_blobs();
    if (!blobs) return blobs.error();
    auto deltas = store.pending_delta_ids();
    if (!deltas) return deltas.error();
    auto in_blobs = files.list(state.blobs());
    if (!in_blobs) return common::with_context("looking for orphan files", in_blobs.error());
    auto in_results = files.list(state.results());
    if (!in_results) return common::with_context("looking for orphan files", in_results.error());
    auto cutoff = std::filesystem::file_time_type::clock::now() - spare_younger_than;
    std::size_t removed = 0;
    auto remove_old = [&](const std::filesystem::path& dir, const FileEntry& entry) {
        bool spared =
            spare_younger_than.count() > 0 && entry.modified > cutoff && !common::temp_file_abandoned(entry.name);
        if (spared) return;
        if (auto gone = files.remove(dir / entry.name); gone)
            ++removed;
        else  // left for the next start; the server can run beside it
            common::process_log().warning("orphan_files", gone.message());
    };
    for (const auto& entry : *in_blobs)
        if (!blobs->count(entry.name)) remove_old(state.blobs(), entry);
    for (const auto& entry : *in_results) {
        auto id = entry.name.ends_with(".delta")     ? entry.name.substr(0, entry.name.size() - 6)
                  : entry.name.ends_with(".moments") ? entry.name.substr(0, entry.name.size() - 8)
                                                     : std::string();
        if (!deltas->count(id)) remove_old(state.results(), entry);
    }
    return removed;
}

ServerCore::ServerCore(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
ServerCore::~ServerCore() { stop(); }

common::Result<std::unique_ptr<ServerCore>> ServerCore::build(ServerOptions options) {
    auto parts = std::make_unique<Parts>();
    auto& p = *parts;
    if (!options.clock) options.clock = system_clock();
    if (!options.file_system) options.file_system = &posix_file_system();
    p.options = std::move(options);
    auto& files = *p.options.file_system;
    if (auto status = open_state(p, files); !status) return status.error();
    p.blobs = std::make_unique<BlobStore>(p.options.state.blobs(), files);
    p.results = std::make_unique<ResultFiles>(p.options.state, files);
    p.published = std::make_unique<PublishedModels>(*p.store, *p.store, *p.blobs);
    p.catch_up = std::make_unique<CatchUpPatches>(*p.store, *p.published, *p.blobs, p.options.clock);
    p.models = std::make_unique<ModelCache>(*p.published);
    p.work = std::make_unique<WorkPool>(p.options.work_threads);
    p.validations = std::make_unique<WorkPool>(p.options.validation_threads);
    p.executor = p.work->executor();
    p.curve_executor = p.options.loss_curve ? p.executor : [](std::function<void()>) {};
    p.process_name = p.options.process_name.empty() ? process_holder_name() : p.options.process_name;

    Parts* raw = &p;
    p.tasks = std::make_unique<TaskRuntimes>(
        *p.store, [raw](const TaskView& task) { return start_task(*raw, task); },
        [raw](TaskRuntime& runtime) { stop_task(*raw, runtime); });
    auto seed = p.options.seed ? *p.options.seed : std::uint64_t{std::random_device{}()};
    p.validator = std::make_unique<Validator>(*p.store, *p.results, *p.models, p.probe_pools, *p.blobs, p.copies,
                                              p.metrics.checks(), p.options.clock, p.accepted, seed);
    ValidationStageSettings claims{p.process_name, kValidationClaimS,
                                   std::chrono::milliseconds(p.options.validation_poll_ms)};
    p.validation = std::make_unique<ValidationStage>(*p.store, *p.validator, p.validations->executor(), p.options.clock,
                                                     std::move(claims));
    p.transitioner = std::make_unique<Transitioner>(*p.store, *p.store, *p.validator, p.options.clock, p.process_name);
    p.scheduler = std::make_unique<Scheduler>(*p.store, *p.store, *p.store, *p.store, *p.published, *p.catch_up, *p.key,
                                              p.options.clock, p.options.blob_base_url,
                                              p.options.seed ? seed + 1 : std::uint64_t{std::random_device{}()},
                                              [raw](const std::string& id) { return raw->tasks->find(id) != nullptr; });
    p.intake = std::make_unique<ResultIntake>(*p.store, *p.store, *p.store, *p.results, p.delta_caps, p.options.clock,
                                              *p.validation);
    // Audits are drawn with the validator's seeded draws, at the upload (result_intake.h).
    p.intake->set_audit_draw([raw](const AssignmentRecord& a, const TaskConfig& config) -> common::Result<bool> {
        if (config.audit <= 0) return false;
        auto client = raw->store->client(a.client_id);
        if (!client) return client.error();
        return *client && raw->validator->draw(audit_chance(config, **client));
    });
    p.volunteers = std::make_unique<VolunteerService>(*p.store, *p.scheduler, *p.intake, p.options.clock);
    return std::unique_ptr<ServerCore>(new ServerCore(std::move(parts)));
}

common::Status ServerCore::start() {
    auto& p = *parts_;
    if (auto status = p.tasks->refresh(); !status) return status.error();
    if (auto status = p.validation->start(); !status) return status.error();
    if (p.options.task_poll_ms > 0) p.tasks->watch(std::chrono::milliseconds(p.options.task_poll_ms));
    return {};
}

void ServerCore::stop() {
    auto& p = *parts_;
    if (p.stopped) return;
    p.stopped = true;
    p.validation->stop();
    p.validations->join();  // queued validations finish; their accepted results reach the aggregator
    p.work->join();
    if (auto released = p.validation->release(); !released)  // else they wait for their claims to lapse
        common::process_log().warning("validation", "giving up the claims on results: " + released.message());
    p.tasks->stop();  // a failed commit waiting to retry is replayed by the next leader
}

void ServerCore::wait_idle() {
    auto& p = *parts_;
    for (int round = 0; round < 2; ++round) {  // a merge may queue an evaluation, and vice versa
        p.validations->wait_idle();
        p.work->wait_idle();
        for (const auto& runtime : p.tasks->all()) runtime->aggregator->wait_idle();
    }
    p.work->wait_idle();
}

const ServerOptions& ServerCore::options() const { return parts_->options; }
const common::SigningKey& ServerCore::key() const { return *parts_->key; }
Executor ServerCore::executor() { return parts_->executor; }
Store& ServerCore::store() { return *parts_->store; }
BlobStore& ServerCore::blobs() { return *parts_->blobs; }
FileSystem& ServerCore::files() { return *parts_->options.file_system; }
PublishedModels& ServerCore::published() { return *parts_->published; }
ModelCache& ServerCore::models() { return *parts_->models; }
DeltaCaps& ServerCore::delta_caps() { return parts_->delta_caps; }
ServerMetrics& ServerCore::metrics() { return parts_->metrics; }
TaskRuntimes& ServerCore::tasks() { return *parts_->tasks; }
Scheduler& ServerCore::scheduler() { return *parts_->scheduler; }
VolunteerService& ServerCore::volunteers() { return *parts_->volunteers; }
Validator& ServerCore::validator() { return *parts_->validator; }
ValidationStage& ServerCore::validation() { return *parts_->validation; }
Transitioner& ServerCore::transitioner() { return *parts_->transitioner; }

}  // namespace tessera::server
