// The validator: takes a stored result (state returned) through the checks of DESIGN.md §5
// that need the delta's contents, cheapest first — decode, names/shapes/dtypes, finiteness,
// non-zero, norm bound, the held-out loss check on a sampled fraction, and the replica
// comparison — then accepts it (handing it to the aggregator) or rejects it with a reason.
// Thread-safe: checks of different results run concurrently on the work pool.
#pragma once

#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>

#include "blob_store.h"
#include "model_cache.h"
#include "model_probe.h"
#include "result_files.h"
#include "store.h"
#include "task_lookup.h"

namespace tessera::server {

class Validator {
public:
    Validator(Store& store, ResultFiles& results, ModelCache& models, ProbePool& probes, Clock clock,
              std::function<void(const std::string&)> on_accepted, std::uint64_t seed);

    // Runs the checks now, on the calling thread.
    common::Status validate(const std::string& assignment_id);
    // Queues validate() on `executor` (errors are logged); a result already queued or being
    // validated is not queued twice.
    void submit(const std::string& assignment_id, const Executor& executor);
    // Accepts a validated result whose replica never came back (it is merged alone).
    common::Status accept_alone(const AssignmentRecord& assignment);
    // 1 credit = 1000 training samples of an accepted result.
    static double credit_for(const TaskConfig& config, std::int64_t local_steps);

private:
    struct Verdict {
        std::string reason;  // empty: passed
        std::string detail;
        double norm = 0;
    };
    common::Result<Verdict> check(const AssignmentRecord& assignment, const TaskView& task, std::int64_t local_steps);
    common::Status settle_replicas(const AssignmentRecord& assignment, const TaskView& task, double norm);
    common::Status accept(const AssignmentRecord& assignment, const TaskView& task, double norm, bool merge);
    common::Status reject(const AssignmentRecord& assignment, const TaskView& task, std::string_view reason,
                          const std::string& detail);
    common::Result<double> base_loss(const std::string& task_id, std::int64_t version, const common::NamedTensors& base,
                                     std::int64_t samples);
    bool sample_loss_check(double fraction);

    Store& store_;
    ResultFiles& results_;
    ModelCache& models_;
    ProbePool& probes_;
    Clock clock_;
    std::function<void(const std::string&)> on_accepted_;
    std::mutex replica_mutex_;         // one replica pair is settled at a time
    std::mutex mutex_;                 // guards rng_, the base-loss cache and in_flight_
    std::set<std::string> in_flight_;  // submitted, verdict not stored yet
    std::mt19937_64 rng_;
    std::string base_loss_key_;
    double base_loss_value_ = 0;
};

}  // namespace tessera::server
