// The soak's checks against the server's database.
#include "soak_check.h"

#include <fstream>
#include <ostream>
#include <sstream>
#include <thread>
#include <vector>

#include "store.h"
#include "task_config.h"

namespace tessera::bench {
namespace {

using server::AssignmentState;

struct Ack {
    std::string wu_id, client_id;
    bool honest = true;
};

common::Result<std::vector<Ack>> read_acks(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) return common::make_error("cannot read " + path.string());
    std::vector<Ack> acks;
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        Ack ack;
        std::string role;
        if (!(fields >> ack.wu_id >> ack.client_id >> role) || (role != "honest" && role != "hostile"))
            return common::make_error(path.string() + ": malformed line '" + line + "'");
        ack.honest = role == "honest";
        acks.push_back(std::move(ack));
    }
    return acks;
}

// The assignment of the acknowledged result (a unit's wu_id names its assignment), or none.
common::Result<std::optional<server::AssignmentRecord>> assignment_of(server::Store& store, const Ack& ack) {
    auto a = store.assignment(ack.wu_id);
    if (!a) return a.error();
    if (*a && (*a)->client_id != ack.client_id) return std::optional<server::AssignmentRecord>();
    return a;
}

bool settled(AssignmentState state) { return state == AssignmentState::Merged || state == AssignmentState::Rejected; }

// Validated, but its unit's other replicas have not all come back (or a tie-break is still
// out): it waits for volunteers, who stopped with the load.
common::Result<bool> waits_for_replicas(server::Store& store, const server::AssignmentRecord& a) {
    if (a.state != AssignmentState::Validated) return false;
    auto unit = store.work_unit(a.work_unit_id);
    if (!unit) return unit.error();
    auto others = store.assignments_of(a.work_unit_id);
    if (!others) return others.error();
    std::int64_t validated = 0;
    for (const auto& other : *others) validated += other.state == AssignmentState::Validated ? 1 : 0;
    return *unit && validated < (*unit)->replicas;
}

// The merge buffer's size of the assignment's task (1 for the policies that merge every result).
common::Result<std::int64_t> buffer_of(server::Store& store, const std::string& task_id) {
    auto task = store.task(task_id);
    if (!task) return task.error();
    if (!*task) return std::int64_t{1};
    auto config = server::parse_task_config((*task)->config_json);
    if (!config) return config.error();
    bool buffered = config->merge.kind == server::PolicyKind::FedBuff || config->merge.kind == server::PolicyKind::DiLoCo;
    return buffered ? config->merge.buffer_size : std::int64_t{1};
}

// Whether the assignment's state is one it keeps now that the fleet has stopped: merged,
// refused, timed out or abandoned, waiting for replicas, or in a fedbuff buffer.
common::Result<bool> stays(server::Store& store, const server::AssignmentRecord& a) {
    if (settled(a.state) || a.state == AssignmentState::TimedOut || a.state == AssignmentState::Abandoned) return true;
    if (a.state == AssignmentState::Accepted) {
        // A buffer short of K waits for arrivals that will not come; a full one is about to merge.
        auto buffer = buffer_of(store, a.task_id);
        if (!buffer) return buffer.error();
        auto counts = store.counts(0);
        if (!counts) return counts.error();
        auto accepted = counts->assignments.find("accepted");
        return accepted != counts->assignments.end() && accepted->second < *buffer;
    }
    return waits_for_replicas(store, a);
}

// Sorts one settled (or, at the end, unsettled) acknowledged result into the verdict.
common::Status judge(server::Store& store, const Ack& ack, const std::optional<server::AssignmentRecord>& a,
                     SoakVerdict& verdict) {
    auto note = [&](const std::string& problem) {
        if (verdict.first_problem.empty()) verdict.first_problem = ack.wu_id + " of " + ack.client_id + ": " + problem;
    };
    if (!a) {
        ++verdict.lost;
        note("acknowledged, but the server has no such assignment");
        return common::Status{};
    }
    if (a->state == AssignmentState::Merged) {
        if (!a->merged_version) {
            ++verdict.lost;
            note("merged without a version");
        } else if (ack.honest) {
            ++verdict.honest_merged;
        } else {
            ++verdict.hostile_merged;
            note("a hostile result was merged");
        }
        return common::Status{};
    }
    if (a->state == AssignmentState::Rejected) {
        auto rejection = store.rejection_of(a->id);
        if (!rejection) return rejection.error();
        if (!*rejection) {
            ++verdict.lost;
            note("refused without a recorded reason");
        } else if (ack.honest) {
            ++verdict.honest_refused[(*rejection)->reason];
        } else {
            ++verdict.hostile_refused;
        }
        return common::Status{};
    }
    auto replica_wait = waits_for_replicas(store, *a);
    if (!replica_wait) return replica_wait.error();
    if (*replica_wait) {
        ++verdict.awaiting_replicas;
        return common::Status{};
    }
    if (a->state == AssignmentState::Accepted) {
        ++verdict.in_merge_buffer;
        auto buffer = buffer_of(store, a->task_id);
        if (!buffer) return buffer.error();
        verdict.buffer_size = *buffer;
        return common::Status{};
    }
    bool pending = a->state == AssignmentState::Returned || a->state == AssignmentState::Validated ||
                   a->state == AssignmentState::Confirmed;
    if (pending) {
        ++verdict.unsettled;
        note("still " + std::string(server::assignment_state_name(a->state)) + " at the end");
    } else {
        ++verdict.lost;
        note("acknowledged, then " + std::string(server::assignment_state_name(a->state)));
    }
    return common::Status{};
}

common::Status count_merges(server::Store& store, SoakVerdict& verdict) {
    auto counts = store.counts(0);
    if (!counts) return counts.error();
    auto merged = counts->assignments.find("merged");
    verdict.merged_assignments = merged == counts->assignments.end() ? 0 : merged->second;
    auto tasks = store.tasks();
    if (!tasks) return tasks.error();
    for (const auto& task : *tasks) {
        auto versions = store.versions(task.id);
        if (!versions) return versions.error();
        for (const auto& version : *versions) verdict.merged_in_versions += version.merged_results;
    }
    return common::Status{};
}

}  // namespace

common::Result<SoakVerdict> check_soak(const SoakCheckOptions& options, std::ostream& out) {
    auto acks = read_acks(options.acks);
    if (!acks) return acks.error();
    auto store = server::Store::connect(options.database_url, false);
    if (!store) return store.error();
    SoakVerdict verdict;
    verdict.acknowledged = static_cast<std::int64_t>(acks->size());
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(options.wait_s);
    std::vector<const Ack*> waiting;
    for (const auto& ack : *acks) waiting.push_back(&ack);
    while (true) {
        bool last_look = std::chrono::steady_clock::now() >= deadline;
        std::vector<const Ack*> still;
        for (const auto* ack : waiting) {
            auto a = assignment_of(**store, *ack);
            if (!a) return a.error();
            if (!last_look && *a) {
                auto done = stays(**store, **a);
                if (!done) return done.error();
                if (!*done) {
                    still.push_back(ack);
                    continue;
                }
            }
            if (auto status = judge(**store, *ack, *a, verdict); !status) return status.error();
        }
        waiting = std::move(still);
        if (waiting.empty()) break;
        std::this_thread::sleep_for(std::chrono::seconds(2));
    }
    if (auto status = count_merges(**store, verdict); !status) return status.error();

    out << "soak check: " << verdict.acknowledged << " acknowledged results\n"
        << "  honest: " << verdict.honest_merged << " merged";
    for (const auto& [reason, count] : verdict.honest_refused) out << ", " << count << " refused (" << reason << ")";
    out << "\n  hostile: " << verdict.hostile_refused << " refused, " << verdict.hostile_merged << " merged (must be 0)\n"
        << "  lost (acknowledged, neither merged nor refused with a reason): " << verdict.lost << " (must be 0)\n"
        << "  unsettled after " << options.wait_s << " s: " << verdict.unsettled << " (must be 0); waiting for "
        << verdict.awaiting_replicas << " replicas' twins; " << verdict.in_merge_buffer
        << " in the merge buffer (must be below its size, " << verdict.buffer_size << ")\n"
        << "  merged assignments " << verdict.merged_assignments << ", merged results counted by versions "
        << verdict.merged_in_versions << " (must be equal: nothing merged twice)\n";
    if (!verdict.first_problem.empty()) out << "  first problem: " << verdict.first_problem << "\n";
    out << (verdict.passed() ? "soak check: PASSED\n" : "soak check: FAILED\n");
    return verdict;
}

}  // namespace tessera::bench
