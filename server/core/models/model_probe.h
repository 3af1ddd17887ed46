// Evaluating weights on the held-out validation data and on the samples a work unit trained
// on, behind an interface so the server's core stays free of torch (server/torch implements
// it). A pool hands one probe to each concurrent evaluation, since a probe (a torch
// workload) is single-threaded.
#pragma once

#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "delta_codec.h"
#include "protocol.h"
#include "result.h"

namespace tessera::server {

struct ProbeResult {
    double loss = 0;
    std::optional<double> accuracy;  // classifiers only
    std::int64_t samples = 0;        // how many validation samples were evaluated
    std::vector<double> sample_losses;  // each sample's loss, in order (loss is their mean)
};

// Each sample's loss, in order, for one weight set.
using SampleLosses = std::vector<double>;

// Asks a probe for every validation sample it holds.
constexpr std::int64_t kWholeValidationSet = std::int64_t{1} << 40;

// Samples a work unit trained on: its shards concatenated in the unit's order, the last
// `max_samples` rows its trainer's first epoch visits (common::first_epoch_rows).
struct AssignedSamples {
    std::vector<std::string> shards;  // their hashes
    // A shard's bytes by hash (the blob store's, through the server's FileSystem).
    std::function<common::Result<common::Bytes>(const std::string& sha256)> read_shard;
    std::uint64_t seed = 0;
    std::int64_t batch_size = 0;
    std::int64_t steps = 0;
    std::int64_t max_samples = 0;
    // Only these of those rows (increasing positions among them), each as the whole evaluation
    // gives it (a loss-check unit's report checked on a sample); empty: all of them.
    std::vector<std::int64_t> rows{};
};

// Kept AdamW moments a replay resumes (those a unit's commitments name), by parameter name.
struct ReplayMoments {
    common::NamedTensors exp_avg, exp_avg_sq;
    std::int64_t steps = 0;
};

// Not thread-safe: one user at a time (ProbePool enforces that).
class ModelProbe {
public:
    virtual ~ModelProbe() = default;
    // Loss on the first `max_samples` validation samples (all of them for
    // kWholeValidationSet), deterministic for given weights.
    virtual common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples) = 0;
    // Each of those samples' loss as the contribution checks compare two weight sets: sample by
    // sample, deterministic, and for a flow model at one t per sample (common::EvalGrid::
    // Stratified: evaluate's mean in expectation for an eighth of its cost).
    // With `rows`, only those of the samples (increasing), each as the whole evaluation gives it.
    virtual common::Result<SampleLosses> check_losses(const common::NamedTensors& weights, std::int64_t max_samples,
                                                      const std::vector<std::int64_t>& rows) = 0;
    common::Result<SampleLosses> check_losses(const common::NamedTensors& weights, std::int64_t max_samples) {
        return check_losses(weights, max_samples, {});
    }
    // How many validation samples the probe holds, and how many rows losses_on_assigned
    // evaluates for `samples` (its `rows` aside): the lengths a loss-check report must have.
    virtual common::Result<std::int64_t> held_out_rows() = 0;
    virtual common::Result<std::int64_t> assigned_rows(const AssignedSamples& samples) = 0;
    // Each weight set's per-sample losses on the same assigned samples, deterministic, as
    // check_losses evaluates them.
    virtual common::Result<std::vector<SampleLosses>> losses_on_assigned(
        const std::vector<const common::NamedTensors*>& weights, const AssignedSamples& samples) = 0;
    // The unit's opening loss at `base` (common::opening_loss): its first training step's loss,
    // on the assigned samples' first batch with step 0's draws under the unit's `hyper`.
    virtual common::Result<double> opening_loss(const common::NamedTensors& base, const AssignedSamples& samples,
                                                const common::Hyperparameters& hyper) = 0;
    // A replay audit (replay_audit.h): the unit of `hyper` trained again on the CPU from `base`
    // and `moments` (nullptr: zero moments) on the assigned samples' shards; the commitments an
    // honest volunteer would have sent (common::replay_commitments), residuals none.
    virtual common::Result<common::Commitments> replay(const common::NamedTensors& base, const AssignedSamples& samples,
                                                       const common::Hyperparameters& hyper,
                                                       const ReplayMoments* moments) = 0;
};

using ModelProbeFactory = std::function<common::Result<std::unique_ptr<ModelProbe>>()>;

// Up to `size` probes, made on first use. Thread-safe.
class ProbePool {
public:
    ProbePool(ModelProbeFactory factory, std::size_t size) : factory_(std::move(factory)), size_(size) {}
    common::Result<ProbeResult> evaluate(const common::NamedTensors& weights, std::int64_t max_samples);
    common::Result<SampleLosses> check_losses(const common::NamedTensors& weights, std::int64_t max_samples,
                                              const std::vector<std::int64_t>& rows = {});
    common::Result<std::int64_t> held_out_rows();
    common::Result<std::int64_t> assigned_rows(const AssignedSamples& samples);
    common::Result<std::vector<SampleLosses>> losses_on_assigned(const std::vector<const common::NamedTensors*>& weights,
                                                                 const AssignedSamples& samples);
    common::Result<double> opening_loss(const common::NamedTensors& base, const AssignedSamples& samples,
                                        const common::Hyperparameters& hyper);
    common::Result<common::Commitments> replay(const common::NamedTensors& base, const AssignedSamples& samples,
                                               const common::Hyperparameters& hyper, const ReplayMoments* moments);

private:
    // Runs `use` with a probe of its own.
    template <class T>
    common::Result<T> with_probe(const std::function<common::Result<T>(ModelProbe&)>& use);

    ModelProbeFactory factory_;
    std::size_t size_;
    std::size_t made_ = 0;
    std::vector<std::unique_ptr<ModelProbe>> idle_;
    std::mutex mutex_;
    std::condition_variable available_;
};

// The probe pools of the tasks this process serves, by task id: each task evaluates on its own
// validation data. Thread-safe.
class ProbePools {
public:
    void add(const std::string& task_id, std::shared_ptr<ProbePool> pool);
    void remove(const std::string& task_id);
    // The task's pool; an error while the task is not served here (yet).
    common::Result<std::shared_ptr<ProbePool>> of(const std::string& task_id) const;

private:
    mutable std::mutex mutex_;
    std::map<std::string, std::shared_ptr<ProbePool>> pools_;
};

}  // namespace tessera::server
