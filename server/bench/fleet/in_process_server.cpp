// InProcessServer: the server's components (server_core.h) around one task, driven in turn.
#include "in_process_server.h"

#include <boost/json.hpp>

#include "optimizer_moments.h"
#include "result_upload.h"
#include "server_core.h"
#include "task_setup.h"
#include "tessera_version.h"

namespace tessera::server {

struct InProcessServer::Parts {
    StateDir state{"."};
    TaskConfig config;
    std::string task_id;
    std::unique_ptr<ServerCore> core;

    std::shared_ptr<TaskRuntime> task() const { return core->tasks().find(task_id); }
    // The aggregator leads for the whole run: the lease outlasts any virtual time.
    std::shared_ptr<Aggregator> aggregator() const { return task()->aggregator->aggregator(); }
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
    if (auto token = initialize_state(p.state); !token) return token.error();
    {
        auto store = Store::connect(p.state.database_url(), false);
        if (!store) return store.error();
        auto task = create_task(p.state, **store, config);
        if (!task) return task.error();
        p.task_id = task->id;
    }
    ServerOptions options;
    options.state = state;
    options.clock = std::move(clock);
    options.seed = seed;
    // Validation on a thread of its own, as the server runs it; upload() waits until the
    // result is validated and, when accepted, merged, so the run stays reproducible.
    options.work_threads = 0;
    options.validation_threads = 1;
    options.tick_interval_s = 0;
    options.task_poll_ms = 0;
    options.checkpoint_every = checkpoints.every;
    options.keep_checkpoints = checkpoints.keep;
    options.aggregator_lease_s = std::int64_t{1} << 40;
    options.validation_poll_ms = 0;
    options.election_poll_ms = 0;  // no thread writes the database behind the simulation's back
    options.loss_curve = false;  // the simulator draws its own curve on the validation set it is asked for
    options.sample_renderer = [](const TaskConfig&) { return std::optional<SampleRendererFactory>(); };
    auto core = ServerCore::build(std::move(options));
    if (!core) return core.error();
    p.core = std::move(*core);
    if (auto status = p.core->start(); !status) return status.error();
    if (!p.task()) return common::make_error("the task " + p.task_id + " is not served");
    return std::unique_ptr<InProcessServer>(new InProcessServer(std::move(parts)));
}

common::Result<ClientRecord> InProcessServer::register_volunteer(const std::string& name) {
    // Only the API checks request signatures, so a volunteer here needs no key pair: its
    // "public key" is a unique label. Its version is this build's: it reads all a unit says.
    auto& core = *parts_->core;
    auto registered = core.store().register_client("sim:" + name, name, common::kVersion, "", core.options().clock());
    if (!registered) return registered.error();
    return **registered;  // no registration limit here: always a record
}

common::Result<common::WorkResponse> InProcessServer::request_work(const common::WorkRequest& request) {
    auto& core = *parts_->core;
    auto client = core.store().client(request.client_id);  // as the API's signature check reads it
    if (!client) return client.error();
    if (!*client) return common::make_error("unknown volunteer " + request.client_id);
    auto answer = core.volunteers().request_work(**client, request);
    if (!answer) return answer.error();
    if (answer->http_status != 200) return common::make_error(answer->error + ": " + answer->message);
    return std::move(answer->response);
}

common::Result<IntakeOutcome> InProcessServer::upload(const std::string& client_id, common::ByteView body,
                                                      const std::string& wu_id, const ReplayMoments* moments) {
    auto& core = *parts_->core;
    auto client = core.store().client(client_id);  // as the API's signature check reads it
    if (!client) return client.error();
    if (!*client) return common::make_error("unknown volunteer " + client_id);
    auto spooled = spool_upload(body, parts_->state.results(), core.files());
    auto outcome = core.volunteers().upload(client_id, spooled);
    if (!outcome || !moments) {
        core.wait_idle();
        if (auto sent = send_awaited_moments(); !sent) return sent.error();
        return outcome;
    }
    if (outcome->moments_wanted)
        if (auto sent = send_moments(client_id, wu_id, *moments); !sent) return sent.error();
    core.wait_idle();
    // A statistical check's flag may ask for them too, as the result's status would say.
    auto held = core.store().assignment(wu_id);
    if (!held) return held.error();
    if (*held && core.volunteers().moments_wanted(**held)) {
        if (auto sent = send_moments(client_id, wu_id, *moments); !sent) return sent.error();
        core.wait_idle();
    } else if (*held && (*held)->state == AssignmentState::Returned) {
        awaiting_[wu_id] = {client_id, *moments};
    }
    if (auto sent = send_awaited_moments(); !sent) return sent.error();
    return outcome;
}

common::Status InProcessServer::send_awaited_moments() {
    auto& core = *parts_->core;
    for (auto it = awaiting_.begin(); it != awaiting_.end();) {
        auto held = core.store().assignment(it->first);
        if (!held) return held.error();
        if (!*held || (*held)->state != AssignmentState::Returned) {
            it = awaiting_.erase(it);
            continue;
        }
        if (!core.volunteers().moments_wanted(**held)) {
            ++it;
            continue;
        }
        if (auto sent = send_moments(it->second.client_id, it->first, it->second.moments); !sent) return sent;
        core.wait_idle();
        it = awaiting_.erase(it);
    }
    return {};
}

common::Status InProcessServer::send_moments(const std::string& client_id, const std::string& wu_id,
                                             const ReplayMoments& moments) {
    auto& core = *parts_->core;
    auto file = common::write_optimizer_moments({moments.steps, moments.exp_avg, moments.exp_avg_sq});
    if (!file) return file.error();
    auto ref = boost::json::serialize(common::to_json(common::WorkUnitRef{client_id, wu_id}));
    auto body = common::pack_result_upload(ref, *file);
    auto spooled = spool_upload(body, parts_->state.results(), core.files());
    auto sent = core.volunteers().upload_moments(client_id, spooled);
    if (!sent) return sent.error();
    if (sent->http_status != 200) return common::make_error("moments refused: " + sent->message);
    return {};
}

common::Result<TickReport> InProcessServer::tick() {
    auto report = parts_->core->transitioner().tick();
    // Results whose hold ended (a loss-check unit nobody answered in time) are validated again,
    // as the validation stage's poller does.
    if (auto polled = parts_->core->validation().poll(); !polled) return polled.error();
    parts_->core->wait_idle();
    if (report && !report->task_errors.empty()) return common::make_error("transitioner: " + report->task_errors.front());
    return report;
}

const common::VerifyKey& InProcessServer::verify_key() const { return parts_->core->key().verify_key(); }
std::filesystem::path InProcessServer::blob_path(const std::string& sha256) const {
    return parts_->core->blobs().path_of(sha256);
}
common::Result<std::filesystem::path> InProcessServer::model_file(const common::WorkUnit& unit) {
    if (auto status = parts_->core->published().ensure(unit.task_id, unit.base_version); !status) return status.error();
    return blob_path(unit.model_blob.sha256);
}

common::Result<std::filesystem::path> InProcessServer::version_file(std::int64_t version) {
    auto record = store().version(parts_->task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("version " + std::to_string(version) + " is not stored");
    if (auto status = parts_->core->published().ensure(**record); !status) return status.error();
    return blob_path((*record)->blob_sha256);
}

std::int64_t InProcessServer::version() const { return parts_->aggregator()->version(); }

common::Result<std::shared_ptr<const common::NamedTensors>> InProcessServer::model(std::int64_t version) {
    return parts_->core->models().get(parts_->task_id, version);
}

std::shared_ptr<const common::NamedTensors> InProcessServer::true_model() const {
    return parts_->aggregator()->model_when_idle();  // upload() waits for the merges
}

StateUsage InProcessServer::state_usage() const { return server::state_usage(parts_->state, parts_->core->files()); }

common::Result<ProbeResult> InProcessServer::evaluate(std::int64_t max_samples) {
    return parts_->task()->probes->evaluate(*true_model(), max_samples);
}

common::Result<ProbeResult> InProcessServer::evaluate_for_guard() {
    auto aggregator = parts_->aggregator();
    auto version = aggregator->version();
    auto model = true_model();
    auto result = parts_->task()->probes->evaluate(*model, parts_->config.eval_samples);
    if (!result) return result.error();
    aggregator->note_evaluation(version, result->loss, std::move(model));
    parts_->core->wait_idle();
    return result;
}

Store& InProcessServer::store() { return parts_->core->store(); }
const TaskConfig& InProcessServer::config() const { return parts_->config; }
const CheckCosts& InProcessServer::check_costs() const { return parts_->core->metrics().checks(); }
double InProcessServer::merge_seconds() const { return parts_->core->metrics().merge_seconds(); }

}  // namespace tessera::server
