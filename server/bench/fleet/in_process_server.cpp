// InProcessServer: ServerApp's components without HTTP, threads pools or timers.
#include "in_process_server.h"

#include <iostream>

#include "aggregator.h"
#include "blob_store.h"
#include "dataset_manifest.h"
#include "ed25519.h"
#include "model_cache.h"
#include "scheduler.h"
#include "task_setup.h"
#include "torch_model.h"
#include "validator.h"

namespace tessera::server {

struct InProcessServer::Parts {
    StateDir state{"."};
    TaskConfig config;
    Clock clock;
    std::string task_id;
    DeltaCaps delta_caps;  // the one task's
    std::unique_ptr<Store> store;
    std::unique_ptr<common::SigningKey> key;
    std::unique_ptr<BlobStore> blobs;
    std::unique_ptr<ResultFiles> results;
    std::unique_ptr<PublishedModels> published;
    std::unique_ptr<ModelCache> models;
    std::shared_ptr<ProbePool> probes;
    ProbePools probe_pools;  // the one task's
    CopyDetector copies;
    CheckCosts check_costs;
    std::atomic<double> merge_seconds{0};
    std::unique_ptr<Aggregator> aggregator;
    std::unique_ptr<Validator> validator;
    std::unique_ptr<Transitioner> transitioner;
    std::unique_ptr<Scheduler> scheduler;
    std::unique_ptr<ResultIntake> intake;

    ~Parts() {
        if (aggregator) aggregator->stop();
    }
};

InProcessServer::InProcessServer(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}
InProcessServer::~InProcessServer() = default;

common::Result<std::unique_ptr<InProcessServer>> InProcessServer::create(const StateDir& state,
                                                                         const TaskConfig& config, Clock clock,
                                                                         std::uint64_t seed,
                                                                         InProcessCheckpoints checkpoints) {
    auto parts = std::make_unique<Parts>();
    auto& p = *parts;
    p.state = state;
    p.config = config;
    p.clock = std::move(clock);
    if (auto token = initialize_state(p.state); !token) return token.error();
    auto store = Store::connect(p.state.database_url(), false);
    if (!store) return store.error();
    p.store = std::move(*store);
    auto task = create_task(p.state, *p.store, config);
    if (!task) return task.error();
    p.task_id = task->id;
    auto key = common::SigningKey::load_pem(p.state.signing_key());
    if (!key) return key.error();
    p.key = std::make_unique<common::SigningKey>(std::move(*key));
    p.blobs = std::make_unique<BlobStore>(p.state.blobs());
    p.results = std::make_unique<ResultFiles>(p.state);
    p.published = std::make_unique<PublishedModels>(*p.store, *p.blobs);
    p.models = std::make_unique<ModelCache>(*p.published);

    std::filesystem::path data_dir = config.data_dir;
    auto manifest = common::load_dataset_manifest(data_dir / "dataset.json");
    if (!manifest) return manifest.error();
    auto factory = make_torch_probe_factory(config, data_dir / manifest->validation.file);
    if (!factory) return factory.error();
    p.probes = std::make_shared<ProbePool>(std::move(*factory), 1);
    p.probe_pools.add(p.task_id, p.probes);
    auto version0 = p.models->get(p.task_id, 0);
    if (!version0) return version0.error();
    p.delta_caps.set(p.task_id, max_delta_bytes_for(value_count(**version0)));

    Parts* raw = &p;
    // The aggregator's executor runs the dashboard's 512-sample curve; the simulator draws its
    // own curve on the validation set it is asked for, so those jobs are dropped.
    Executor no_curve = [](std::function<void()>) {};
    AggregatorHooks hooks;
    hooks.merge_timer = [raw](double seconds) { raw->merge_seconds.fetch_add(seconds); };
    hooks.checkpoint_every = checkpoints.every;
    hooks.keep_checkpoints = checkpoints.keep;
    hooks.model_committed = [raw](const std::string& task_id, std::int64_t version, const common::NamedTensors& model) {
        raw->copies.note_model(task_id, version, model);
    };
    p.aggregator = std::make_unique<Aggregator>(*p.store, *p.blobs, *p.published, *p.results, p.probes, no_curve,
                                                p.clock, std::move(hooks));
    p.validator = std::make_unique<Validator>(
        *p.store, *p.results, *p.models, p.probe_pools, *p.blobs, p.copies, p.check_costs, p.clock,
        [raw](const std::string&, const std::string& id) { raw->aggregator->enqueue(id); }, seed);
    p.transitioner = std::make_unique<Transitioner>(
        *p.store, *p.validator, [](std::function<void()> job) { job(); }, p.clock);
    p.scheduler = std::make_unique<Scheduler>(*p.store, *p.published, *p.key, p.clock, "", seed + 1);
    p.intake =
        std::make_unique<ResultIntake>(*p.store, *p.results, p.delta_caps, p.clock, [raw](const std::string& id) {
            if (auto status = raw->validator->validate(id); !status)
                std::cerr << "validator: " << id << ": " << status.message() << "\n";
        });
    if (auto status = p.aggregator->start(p.task_id); !status) return status.error();
    return std::unique_ptr<InProcessServer>(new InProcessServer(std::move(parts)));
}

common::Result<ClientRecord> InProcessServer::register_volunteer(const std::string& name) {
    // Only the API checks request signatures, so a volunteer here needs no key pair: its
    // "public key" is a unique label.
    auto registered = parts_->store->register_client("sim:" + name, name, "fleet-simulator", "", parts_->clock());
    if (!registered) return registered.error();
    return **registered;  // no registration limit here: always a record
}

common::Result<common::WorkResponse> InProcessServer::request_work(const common::WorkRequest& request) {
    auto& p = *parts_;
    if (auto seen = p.store->note_client_seen(request.client_id, request.device.name, request.samples_per_s, p.clock());
        !seen)
        return seen.error();
    auto client = p.store->client(request.client_id);
    if (!client) return client.error();
    if (!*client) return common::make_error("unknown volunteer " + request.client_id);
    return p.scheduler->assign(**client, request);
}

common::Result<IntakeOutcome> InProcessServer::upload(const std::string& client_id, common::ByteView body) {
    auto outcome = parts_->intake->receive(client_id, body);
    parts_->aggregator->wait_idle();
    return outcome;
}

common::Result<TickReport> InProcessServer::tick() {
    auto report = parts_->transitioner->tick();
    parts_->aggregator->wait_idle();
    if (report && !report->task_errors.empty()) return common::make_error("transitioner: " + report->task_errors.front());
    return report;
}

const common::VerifyKey& InProcessServer::verify_key() const { return parts_->key->verify_key(); }
std::filesystem::path InProcessServer::blob_path(const std::string& sha256) const {
    return parts_->blobs->path_of(sha256);
}
common::Result<std::filesystem::path> InProcessServer::model_file(const common::WorkUnit& unit) {
    if (auto status = parts_->published->ensure(unit.task_id, unit.base_version); !status) return status.error();
    return blob_path(unit.model_blob.sha256);
}

std::int64_t InProcessServer::version() const { return parts_->aggregator->version(); }

common::Result<std::shared_ptr<const common::NamedTensors>> InProcessServer::model(std::int64_t version) {
    return parts_->models->get(parts_->task_id, version);
}

std::shared_ptr<const common::NamedTensors> InProcessServer::true_model() const {
    return parts_->aggregator->model_when_idle();  // upload() waits for the merges
}

StateUsage InProcessServer::state_usage() const { return server::state_usage(parts_->state); }

common::Result<ProbeResult> InProcessServer::evaluate(std::int64_t max_samples) {
    return parts_->probes->evaluate(*true_model(), max_samples);
}

Store& InProcessServer::store() { return *parts_->store; }
const TaskConfig& InProcessServer::config() const { return parts_->config; }
const CheckCosts& InProcessServer::check_costs() const { return parts_->check_costs; }
double InProcessServer::merge_seconds() const { return parts_->merge_seconds.load(); }

}  // namespace tessera::server
