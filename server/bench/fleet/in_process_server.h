// The server's own components, built as `tessera-server run` builds them (server_core.h) —
// store, blobs, scheduler, intake, validator, transitioner, the task's aggregator with its
// merge policy — around a state directory with one task, an injected clock and no HTTP: the
// fleet simulator's volunteers and the ingest benchmark call the volunteer service as the API
// does (volunteer_service.h). Validation runs on its own thread, checks and merges on the
// thread that hands them over; upload() returns after the result is validated and, when
// accepted, merged. Not thread-safe: one simulation drives it.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>

#include "bytes.h"
#include "model_probe.h"
#include "protocol.h"
#include "result_intake.h"
#include "state_dir.h"
#include "store.h"
#include "task_config.h"
#include "transitioner.h"

namespace tessera::server {

struct InProcessCheckpoints {
    std::int64_t every = 20;
    std::int64_t keep = 3;
};

class InProcessServer {
public:
    // Initialises `dir` (which must not hold a server yet), creates the task and starts the
    // components. `seed` seeds the scheduler's and validator's random choices;
    // `checkpoints` as `tessera-server run --checkpoint-every`, `--keep-checkpoints`.
    static common::Result<std::unique_ptr<InProcessServer>> create(const StateDir& state,
                                                                   const TaskConfig& config, Clock clock,
                                                                   std::uint64_t seed,
                                                                   InProcessCheckpoints checkpoints = {});
    ~InProcessServer();

    common::Result<ClientRecord> register_volunteer(const std::string& name);
    // What POST /api/v1/work does once its signature is checked (volunteer_service.h).
    common::Result<common::WorkResponse> request_work(const common::WorkRequest& request);
    // What POST /api/v1/results does with `body` (spooled to the results directory, then
    // taken as the API takes it), then validation and merging, all before returning. When the
    // answer, or once validated its status, asks for the moments unit `wu_id` started from,
    // `moments` (when given) are posted as POST /api/v1/results/moments posts them.
    common::Result<IntakeOutcome> upload(const std::string& client_id, common::ByteView body,
                                         const std::string& wu_id = {}, const ReplayMoments* moments = nullptr);
    common::Result<TickReport> tick();

    const common::VerifyKey& verify_key() const;
    std::filesystem::path blob_path(const std::string& sha256) const;
    // The file of a unit's base model, written first if it is not stored (a version between
    // checkpoints), as for a volunteer that downloads it whole.
    common::Result<std::filesystem::path> model_file(const common::WorkUnit& unit);
    // The same for any stored version's published model (a stale base's).
    common::Result<std::filesystem::path> version_file(std::int64_t version);
    std::int64_t version() const;
    // A version's published model (what volunteers train from).
    common::Result<std::shared_ptr<const common::NamedTensors>> model(std::int64_t version);
    // The aggregator's true model at the current version (with downlink patches the published
    // one approaches it), and its validation loss (and accuracy) on the first `max_samples`.
    std::shared_ptr<const common::NamedTensors> true_model() const;
    common::Result<ProbeResult> evaluate(std::int64_t max_samples);
    // What the server's loss curve does for a version: evaluates the true model on the task's
    // eval_samples and hands the loss to the aggregator's divergence guard, which acts on it
    // before this returns.
    common::Result<ProbeResult> evaluate_for_guard();
    Store& store();
    const TaskConfig& config() const;
    // The state directory's size now (docs/operations.md, "Checkpoints and retention").
    StateUsage state_usage() const;
    // What the contribution checks and the merges cost so far (the server's compute).
    const CheckCosts& check_costs() const;
    double merge_seconds() const;

    struct Parts;

private:
    explicit InProcessServer(std::unique_ptr<Parts> parts);
    // POST /api/v1/results/moments of `moments` for unit `wu_id`, refused or not an error.
    common::Status send_moments(const std::string& client_id, const std::string& wu_id, const ReplayMoments& moments);
    // The moments of results still held (for a loss-check unit's answer), sent once one is
    // flagged and asks for them, as a volunteer polling its result's status sends them.
    common::Status send_awaited_moments();
    struct Awaiting {
        std::string client_id;
        ReplayMoments moments;
    };
    std::map<std::string, Awaiting> awaiting_;  // by wu_id
    std::unique_ptr<Parts> parts_;
};

}  // namespace tessera::server
