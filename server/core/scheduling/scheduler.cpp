// Scheduler: choosing, building and signing work units.
#include "scheduler.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <boost/json.hpp>

#include "assignment_unit.h"
#include "bytes.h"
#include "clock.h"
#include "expert_affinity.h"
#include "logger.h"
#include "signed_envelope.h"
#include "text_encoding.h"
#include "trust.h"
#include "version_number.h"

namespace tessera::server {
namespace {

// The first client release that resumes a twin's `moments` blob (docs/protocol.md, "Moments for
// a twin"); an older one refuses such a unit as malformed and stops, so it is not sent one. A
// client's version is the one it registered with at its latest start.
constexpr std::string_view kTwinMomentsClientVersion = "0.2.0";

bool reads_twin_moments(const ClientRecord& client) {
    return !common::version_older(client.client_version, kTwinMomentsClientVersion);
}

// The first client release that runs loss-check units (docs/protocol.md, "Loss-check units").
constexpr std::string_view kLossCheckClientVersion = "0.3.0";

}  // namespace

Scheduler::Scheduler(WorkStore& work, TaskStore& tasks, VersionStore& versions, HistoryStore& history,
                     PublishedModels& published, CatchUpPatches& catch_up, const common::SigningKey& key, Clock clock,
                     std::string blob_base_url, std::uint64_t seed, TaskFilter served)
    : work_(work), tasks_(tasks), versions_(versions), published_(published), catch_up_(catch_up), key_(key),
      clock_(std::move(clock)), blob_base_url_(std::move(blob_base_url)), served_(std::move(served)), rng_(seed),
      pace_(history) {}

bool Scheduler::device_fits(const TaskConfig& config, const common::DeviceInfo& device) {
    if (config.requires_device == "cuda" && device.kind != "cuda") return false;
    auto needed = static_cast<std::int64_t>(config.min_device_memory_gb * double(common::kGiB));
    return device.memory_bytes >= needed;
}

bool Scheduler::volunteer_allows(const common::WorkRequest& request, const std::string& id, const std::string& model) {
    auto named = [&](const std::vector<std::string>& names) {
        return std::find(names.begin(), names.end(), id) != names.end() ||
               std::find(names.begin(), names.end(), model) != names.end();
    };
    return (request.only_tasks.empty() || named(request.only_tasks)) && !named(request.exclude_tasks);
}

common::Result<std::optional<DrawnTask>> Scheduler::choose_task(const ClientRecord& client,
                                                                const common::WorkRequest& request, WorkView& view) {
    std::vector<DrawnTask> eligible;
    for (auto& seen : view.tasks) {
        const auto& record = seen.task;
        if (record.state != TaskState::Active || !(record.weight > 0)) continue;
        if (served_ && !served_(record.id)) continue;
        auto task = configs_.view(std::move(seen.task));
        if (!task) return task.error();
        if (!device_fits(task->config, request.device)) continue;
        if (!volunteer_allows(request, task->record.id, task->config.model)) continue;
        eligible.push_back({std::move(*task), std::move(seen.current), seen.published_version, seen.reissuable});
    }
    if (eligible.empty()) return std::optional<DrawnTask>();
    // An expert group is drawn as one, by its members' weights together; within it the
    // volunteer keeps its member (expert_affinity.h).
    std::map<std::string, std::vector<std::size_t>> groups;
    std::vector<std::vector<std::size_t>> draws;  // each: one task, or a group's members
    for (std::size_t i = 0; i < eligible.size(); ++i) {
        const auto& group = eligible[i].task.config.expert_group;
        if (group.empty())
            draws.push_back({i});
        else
            groups[group].push_back(i);
    }
    for (auto& [group, members] : groups) draws.push_back(std::move(members));
    auto weight_of = [&](const std::vector<std::size_t>& members) {
        double sum = 0;
        for (auto i : members) sum += eligible[i].task.record.weight;
        return sum;
    };
    double total = 0;
    for (const auto& d : draws) total += weight_of(d);
    double draw = uniform() * total;
    auto drawn = &draws.back();
    for (auto& d : draws) {
        draw -= weight_of(d);
        if (draw < 0) {
            drawn = &d;
            break;
        }
    }
    if (drawn->size() == 1) return std::optional<DrawnTask>(std::move(eligible[drawn->front()]));
    std::vector<GroupMember> members;
    for (auto i : *drawn) members.push_back({eligible[i].task.record.id, eligible[i].task.record.weight});
    return std::optional<DrawnTask>(std::move(eligible[(*drawn)[sticky_member(client.id, members)]]));
}

common::Result<FleetNow> Scheduler::fleet_now(const TaskConfig& config) {
    if (!sizing_reads_fleet(config)) return FleetNow{};
    auto pace = pace_.pace(config, clock_());
    if (!pace) return pace.error();
    return FleetNow{pace->concurrency, pace->fastest_samples_per_s};
}

std::string Scheduler::random_id(const char* prefix) {
    std::uint64_t value = random_bits();
    common::Bytes bytes(6);
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(value >> (8 * i));
    return prefix + common::to_hex(bytes);
}

std::uint64_t Scheduler::random_bits() {
    std::lock_guard lock(state_mutex_);
    return rng_();
}

double Scheduler::uniform() {
    std::lock_guard lock(state_mutex_);
    return std::uniform_real_distribution<double>(0, 1)(rng_);
}

namespace {

// The record of version `version`: `known` when it is that version's, else read.
common::Result<VersionRecord> base_record(VersionStore& store, const std::string& task_id, std::int64_t version,
                                          const VersionRecord* known) {
    if (known && known->version == version) return *known;
    auto record = store.version(task_id, version);
    if (!record) return record.error();
    if (!*record) return common::make_error("model version " + std::to_string(version) + " is missing");
    return std::move(**record);
}

// Replicas must be comparable: both start AdamW afresh, or, an audit twin of a kept unit, from
// the moments that unit resumed (twin_moments.h); none encodes a carried residual.
void set_optimizer_and_encoding(const WorkUnitRecord& unit, const TaskConfig& config, common::WorkUnit& wu) {
    if (!unit.moments_sha256.empty()) wu.moments = common::BlobRef{unit.moments_sha256, unit.moments_bytes};
    wu.hyper.optimizer = wu.moments          ? common::InnerOptimizer::Kept
                         : unit.replicas > 1 ? common::InnerOptimizer::Fresh
                                             : config.inner_optimizer;
    wu.encoding = config.codec;
    wu.encoding.carry_residual = unit.replicas <= 1;
}

common::WorkResponse no_work(std::int64_t retry_after_s) {
    common::WorkResponse response;
    response.retry_after_s = retry_after_s;
    return response;
}

}  // namespace

common::Result<common::WorkResponse> Scheduler::assign(const ClientRecord& client, const common::WorkRequest& request) {
    auto view = work_.work_view(client.id, clock_() - kVolunteerActiveWindowS);
    if (!view) return view.error();
    auto drawn = choose_task(client, request, *view);
    if (!drawn) return drawn.error();
    if (!*drawn) return no_work(kRetryNoTaskS);
    if (!(*drawn)->current)
        return common::make_error("model version " + std::to_string((*drawn)->task.record.version) + " is missing");
    {
        std::lock_guard lock(state_mutex_);
        holdings_.note(client.id, request.cached_shards, clock_());  // busy or not, it holds them
    }
    // No lock is held from here on: the store decides each claim in its own transaction, and a
    // claim another request won first is lost and tried again.
    for (int attempt = 0; attempt < kClaimAttempts; ++attempt) {
        auto response = try_assign(**drawn, *view, client, request, attempt == 0);
        if (!response) return response.error();
        if (*response) return std::move(**response);
    }
    return no_work(kRetryBusyS);
}

common::Result<std::optional<WorkUnitRecord>> Scheduler::reissuable_unit(const DrawnTask& task,
                                                                         const ClientRecord& client,
                                                                         const std::set<std::string>& cached) {
    auto reissuable = work_.reissuable_work_units(task.task.record.id, client.id);
    if (!reissuable) return reissuable.error();
    // An audit twin is computed by a trusted volunteer only (docs/operations.md, "Audit twins").
    if (!is_trusted(task.task.config, client))
        std::erase_if(*reissuable, [](const WorkUnitRecord& unit) { return unit.trusted_only; });
    if (!reads_twin_moments(client))
        std::erase_if(*reissuable, [](const WorkUnitRecord& unit) { return !unit.moments_sha256.empty(); });
    // A loss-check unit goes to anyone trusted but the checked result's volunteer, who reads it.
    const bool reads_checks = !common::version_older(client.client_version, kLossCheckClientVersion);
    std::erase_if(*reissuable, [&](const WorkUnitRecord& unit) {
        return !unit.checks.empty() && (!reads_checks || unit.checks_client == client.id);
    });
    if (reissuable->empty()) return std::optional<WorkUnitRecord>();
    auto held = [&](const std::vector<std::string>& shards) {
        return std::count_if(shards.begin(), shards.end(), [&](const auto& s) { return cached.count(s) > 0; });
    };
    auto best = std::max_element(reissuable->begin(), reissuable->end(),
                                 [&](const auto& a, const auto& b) { return held(a.shards) < held(b.shards); });
    return std::optional<WorkUnitRecord>(std::move(*best));
}

common::Result<std::optional<common::WorkResponse>> Scheduler::try_assign(const DrawnTask& task, const WorkView& view,
                                                                          const ClientRecord& client,
                                                                          const common::WorkRequest& request,
                                                                          bool first_try) {
    // A quick look first (a busy volunteer costs no unit drawn); the claim decides.
    auto limit = in_flight_limit(task.task.config, client);
    if (first_try && view.in_flight >= limit) return std::optional(no_work(kRetryBusyS));

    std::set<std::string> cached(request.cached_shards.begin(), request.cached_shards.end());
    if (task.reissuable || !first_try) {
        auto again = reissuable_unit(task, client, cached);
        if (!again) return again.error();
        if (*again) return issue(task, client, request, **again, false, limit);
    }

    auto shards = tasks_.shards(task.task.record.id);
    if (!shards) return shards.error();
    if (shards->empty()) return std::optional(no_work(kRetryNoShardS));
    // Least-used shards first (even epochs), then ones the volunteer already holds, then ones
    // fewest other volunteers hold, so that each collects its own (locality).
    std::map<std::string, int> others;
    {
        std::lock_guard lock(state_mutex_);
        for (const auto& s : *shards) others[s.sha256] = holdings_.held_by_others(s.sha256, client.id);
    }
    std::stable_sort(shards->begin(), shards->end(), [&](const ShardRecord& a, const ShardRecord& b) {
        if (a.uses != b.uses) return a.uses < b.uses;
        if (cached.count(a.sha256) != cached.count(b.sha256)) return cached.count(a.sha256) > cached.count(b.sha256);
        return others[a.sha256] < others[b.sha256];
    });
    auto fleet = fleet_now(task.task.config);
    if (!fleet) return fleet.error();
    auto unit = new_unit(task, client, request, *shards, *fleet, view.active_clients >= 2);
    return issue(task, client, request, unit, true, limit, &*shards);
}

WorkUnitRecord Scheduler::new_unit(const DrawnTask& task, const ClientRecord& client,
                                   const common::WorkRequest& request, const std::vector<ShardRecord>& shards,
                                   const FleetNow& fleet, bool others_around) {
    const auto& config = task.task.config;
    WorkUnitRecord unit;
    unit.id = random_id("wu-");
    unit.task_id = task.task.record.id;
    unit.base_version = task.published_version;
    auto count = std::min<std::size_t>(shards.size(), static_cast<std::size_t>(config.shards_per_unit));
    for (std::size_t i = 0; i < count; ++i) unit.shards.push_back(shards[i].sha256);
    unit.local_steps = unit_local_steps(config, fleet, request.samples_per_s);
    unit.seed = static_cast<std::int64_t>(random_bits() >> 11);  // 53 bits: exact in JSON
    unit.replicas = others_around && uniform() < replication_chance(config, client) ? 2 : 1;
    unit.created_at = clock_();
    return unit;
}

// A unit sent again on its old base (a replica's twin, an audit twin, or a retry) keeps the
// schedule span of its latest assignment on that base, so that replicas train alike (not its
// first: a unit rebased after a timeout was stamped anew, and an audit twin must match the
// audited result); a new or rebased unit starts where the run stands now.
common::Status Scheduler::stamp_schedule_of(const TaskView& task, const WorkUnitRecord& unit, bool same_base,
                                            std::int64_t now, common::Hyperparameters& hyper) {
    if (!task.config.lr_schedule) return {};
    auto earlier = same_base ? work_.assignments_of(unit.id)
                             : common::Result<std::vector<AssignmentRecord>>(std::vector<AssignmentRecord>());
    if (!earlier) return earlier.error();
    for (auto a = earlier->rbegin(); a != earlier->rend(); ++a) {
        auto sent = sent_work_unit(*a);
        if (!sent) return common::with_context("the schedule of unit " + unit.id, sent.error());
        if (sent->base_version != unit.base_version) continue;
        hyper.schedule = sent->hyper.schedule;
        hyper.schedule_from = sent->hyper.schedule_from;
        hyper.schedule_to = sent->hyper.schedule_to;
        return {};
    }
    auto pace = pace_.pace(task.config, now);
    if (!pace) return pace.error();
    stamp_schedule(task.config, *pace, hyper);
    return {};
}

common::Result<std::optional<common::WorkResponse>> Scheduler::issue(const DrawnTask& drawn, const ClientRecord& client,
                                                                     const common::WorkRequest& request,
                                                                     const WorkUnitRecord& unit, bool new_unit,
                                                                     std::int64_t max_in_flight,
                                                                     const std::vector<ShardRecord>* known_shards) {
    if (!unit.checks.empty()) return issue_check(drawn, client, unit, max_in_flight);
    const auto& task = drawn.task;
    auto now = clock_();
    auto rebased = rebase_of(drawn, unit, new_unit);
    if (!rebased) return rebased.error();
    std::optional<std::int64_t> rebase = *rebased;
    std::int64_t base_version = rebase.value_or(unit.base_version);
    auto version = base_record(versions_, task.record.id, base_version, drawn.current ? &*drawn.current : nullptr);
    if (!version) return version.error();
    auto shards =
        known_shards ? common::Result<std::vector<ShardRecord>>(*known_shards) : tasks_.shards(task.record.id);
    if (!shards) return shards.error();

    common::WorkUnit wu;
    wu.wu_id = random_id("a-");
    wu.task_id = task.record.id;
    wu.client_id = client.id;
    wu.model = task.config.model;
    wu.base_version = base_version;
    wu.model_blob = {version->blob_sha256, version->blob_bytes};
    if (auto status = offer_patches(task, request, *version, unit.replicas > 1, wu); !status) return status.error();
    if (wu.patches.empty()) {
        // The current model's first publisher came with the drawn task; an older model's is read.
        bool current = drawn.current && drawn.current->blob_sha256 == version->blob_sha256;
        auto status = current ? published_.ensure(*version, drawn.published_version, task.config.model)
                              : published_.ensure(*version);
        if (!status) return status.error();
    }
    for (const auto& hash : unit.shards)
        for (const auto& shard : *shards)
            if (shard.sha256 == hash) wu.shards.push_back({shard.sha256, shard.bytes});
    wu.blob_base_url = blob_base_url_;
    wu.hyper = inner_loop_of(task.config, unit.local_steps, unit.seed);
    if (auto status = stamp_schedule_of(task, unit, !new_unit && !rebase, now, wu.hyper); !status)
        return status.error();
    set_optimizer_and_encoding(unit, task.config, wu);
    wu.issued_at = now;
    wu.deadline = now + task.config.deadline_s;

    return seal_and_claim(wu, unit, new_unit, rebase, max_in_flight);
}

common::Result<std::optional<std::int64_t>> Scheduler::rebase_of(const DrawnTask& task, const WorkUnitRecord& unit,
                                                                 bool new_unit) {
    if (new_unit || unit.replicas != 1) return std::optional<std::int64_t>();
    auto live = work_.live_assignments(unit.id);
    if (!live) return live.error();
    if (*live == 0 && task.published_version != unit.base_version)
        return std::optional<std::int64_t>(task.published_version);
    return std::optional<std::int64_t>();
}

common::Status Scheduler::offer_patches(const TaskView& task, const common::WorkRequest& request,
                                        const VersionRecord& base, bool replicated, common::WorkUnit& wu) {
    if (!replicated) {
        auto catch_up = catch_up_.offer(task.record.id, task.config, request.client_id, request.held_model, base);
        if (!catch_up)  // the published path still works: the volunteer is served, the operator told
            common::process_log().warning("catch_up_failed", task.record.id + ": " + catch_up.message());
        else if (*catch_up) {
            wu.model_blob = (*catch_up)->model;
            wu.patch_from = request.held_model;
            wu.patches = {(*catch_up)->patch};
            return {};
        }
    }
    return offer_patch_chain(task, request.held_model, base, wu);
}

common::Status Scheduler::offer_patch_chain(const TaskView& task, const std::string& held_model,
                                            const VersionRecord& base, common::WorkUnit& wu) {
    if (held_model.empty() || held_model == base.blob_sha256) return {};
    // The published versions after the held one, each with its patch.
    auto chain = versions_.versions_after_blob(task.record.id, held_model, base.version);
    if (!chain) return chain.error();
    std::vector<common::BlobRef> patches;
    std::int64_t bytes = 0;
    std::string previous = held_model;
    for (const auto& v : *chain) {
        if (v.blob_sha256 == previous) continue;  // not published: the model of the version before
        if (!v.patch_sha256) return {};           // published before patches were on
        patches.push_back({*v.patch_sha256, v.patch_bytes});
        bytes += v.patch_bytes;
        previous = v.blob_sha256;
    }
    if (patches.empty() || patches.size() > common::kMaxPatchChain || bytes >= base.blob_bytes) return {};
    wu.patch_from = held_model;
    wu.patches = std::move(patches);
    return {};
}

}  // namespace tessera::server
