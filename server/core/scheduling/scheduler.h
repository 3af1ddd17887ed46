// The scheduler: answers a volunteer's work request with a signed work unit or "no work".
// Among the active tasks this process serves that the volunteer's device can run (CUDA,
// memory), it draws one with probability proportional to the operator's weights (an expert
// group's members as one, and then the member the volunteer keeps: expert_affinity.h). Within the
// task it reissues open units first (preferring ones whose shards the volunteer holds), otherwise
// builds a new unit from the least-used shards so each epoch covers the dataset evenly (among
// those, shards the volunteer holds, then shards fewest other volunteers hold: locality),
// scales local steps to the volunteer's measured speed, and decides replication by the
// volunteer's valid streak (BOINC adaptive replication). Thread-safe.
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>

#include "catch_up_patches.h"
#include "clock.h"
#include "ed25519.h"
#include "state_dir.h"
#include "protocol.h"
#include "published_models.h"
#include "run_pace.h"
#include "shard_holdings.h"
#include "store_tasks.h"
#include "store_versions.h"
#include "store_work.h"
#include "task_lookup.h"
#include "unit_sizing.h"

namespace tessera::server {

// A task drawn for a work request, as the request's one read of the store saw it (WorkView).
struct DrawnTask {
    TaskView task;
    std::optional<VersionRecord> current;  // the current version's record
    std::int64_t published_version = 0;    // the first version publishing the current model
    bool reissuable = false;               // it had a unit the volunteer could be given again
};

class Scheduler {
public:
    // Whether this process serves (can validate) a task; empty: every task.
    using TaskFilter = std::function<bool(const std::string& task_id)>;
    // The store's parts: `work` claims units, `tasks` gives shards, `versions` bases and patch
    // chains, `history` the fleet's pace; `catch_up` the tasks' catch-up patches.
    Scheduler(WorkStore& work, TaskStore& tasks, VersionStore& versions, HistoryStore& history,
              PublishedModels& published, CatchUpPatches& catch_up, const common::SigningKey& key, Clock clock,
              std::string blob_base_url, std::uint64_t seed, TaskFilter served = {});
    common::Result<common::WorkResponse> assign(const ClientRecord& client, const common::WorkRequest& request);

    // Whether a volunteer with `device` can take the task's units.
    static bool device_fits(const TaskConfig& config, const common::DeviceInfo& device);
    // Whether the volunteer's choice lets it take the task `id` of model `model`: named by id or
    // model in the request's `only_tasks` (when it names any), and in `exclude_tasks` neither way.
    static bool volunteer_allows(const common::WorkRequest& request, const std::string& id, const std::string& model);

private:
    // The fleet at work on the task, read only when its units are sized by it (unit_sizing.h).
    common::Result<FleetNow> fleet_now(const TaskConfig& config);
    // The task to work on: drawn by weight among the eligible ones the view shows (an expert
    // group as one, then the volunteer's own member of it); none when there is none.
    common::Result<std::optional<DrawnTask>> choose_task(const ClientRecord& client, const common::WorkRequest& request,
                                                         WorkView& view);
    // One try at a unit for the volunteer: nothing when the unit it chose was given out by
    // another request meanwhile (the caller tries again). The first try trusts the view.
    common::Result<std::optional<common::WorkResponse>> try_assign(const DrawnTask& task, const WorkView& view,
                                                                   const ClientRecord& client,
                                                                   const common::WorkRequest& request, bool first_try);
    // A unit to give again (the one whose shards the volunteer holds most of), if any.
    common::Result<std::optional<WorkUnitRecord>> reissuable_unit(const DrawnTask& task, const ClientRecord& client,
                                                                  const std::set<std::string>& cached);
    // A new unit from the task's shards (`shards` sorted for the volunteer); its replicas drawn
    // from the volunteer's trust and whether others are around.
    WorkUnitRecord new_unit(const DrawnTask& task, const ClientRecord& client, const common::WorkRequest& request,
                            const std::vector<ShardRecord>& shards, const FleetNow& fleet, bool others_around);
    common::Result<std::optional<common::WorkResponse>> issue(const DrawnTask& task, const ClientRecord& client,
                                                              const common::WorkRequest& request,
                                                              const WorkUnitRecord& unit, bool new_unit,
                                                              std::int64_t max_in_flight,
                                                              const std::vector<ShardRecord>* shards = nullptr);
    // `wu` sealed and claimed as an assignment of `unit` (created with it when `new_unit`, else
    // rebased first when `rebase` says): the response; none when another request won the claim;
    // "no work" when the volunteer holds its limit of units.
    common::Result<std::optional<common::WorkResponse>> seal_and_claim(const common::WorkUnit& wu,
                                                                       const WorkUnitRecord& unit, bool new_unit,
                                                                       std::optional<std::int64_t> rebase,
                                                                       std::int64_t max_in_flight);
    // A loss-check unit (scheduler_checks.cpp): the checked assignment's unit as it was sent, with
    // the check's question, this volunteer's id and a new wu_id.
    common::Result<std::optional<common::WorkResponse>> issue_check(const DrawnTask& task, const ClientRecord& client,
                                                                    const WorkUnitRecord& unit,
                                                                    std::int64_t max_in_flight);
    // An unreplicated unit that failed is recomputed on the current model, not the old one: the
    // version a unit handed out again is rebased on, if any.
    common::Result<std::optional<std::int64_t>> rebase_of(const DrawnTask& task, const WorkUnitRecord& unit,
                                                          bool new_unit);
    // From the model the volunteer holds to the unit's base: one catch-up patch (its own
    // reconstruction as the unit's model) when the task has them and the unit is not
    // replicated (twins start from one model), else the published patch chain, when there is
    // one and it is smaller than the model; otherwise the unit offers none (and the model's file
    // is written now if it is not stored: a version between checkpoints).
    common::Status offer_patches(const TaskView& task, const common::WorkRequest& request, const VersionRecord& base,
                                 bool replicated, common::WorkUnit& wu);
    common::Status offer_patch_chain(const TaskView& task, const std::string& held_model, const VersionRecord& base,
                                     common::WorkUnit& wu);
    common::Status stamp_schedule_of(const TaskView& task, const WorkUnitRecord& unit, bool same_base,
                                     std::int64_t now, common::Hyperparameters& hyper);
    std::string random_id(const char* prefix);
    std::uint64_t random_bits();
    double uniform();

    WorkStore& work_;
    TaskStore& tasks_;
    VersionStore& versions_;
    PublishedModels& published_;
    CatchUpPatches& catch_up_;
    const common::SigningKey& key_;
    Clock clock_;
    std::string blob_base_url_;
    TaskFilter served_;
    // Guards rng_ and holdings_; never held across database work. Requests are otherwise
    // assigned concurrently: each claim is the store's transaction (Store::Claim).
    std::mutex state_mutex_;
    TaskConfigCache configs_;
    std::mt19937_64 rng_;
    ShardHoldings holdings_;
    RunPaceCache pace_;  // where each task's run stands, for the units' schedule
};

constexpr std::int64_t kRetryNoTaskS = 60;
constexpr std::int64_t kRetryBusyS = 30;
constexpr std::int64_t kRetryNoShardS = 15;
// Claims a request may lose to concurrent ones before it is told to come back.
constexpr int kClaimAttempts = 4;

}  // namespace tessera::server
