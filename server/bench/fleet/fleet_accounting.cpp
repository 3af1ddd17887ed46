// The fleet simulator's account of a run (fleet_accounting.h).
#include "fleet_accounting.h"

#include <boost/json.hpp>

#include <algorithm>
#include <limits>
#include <vector>

#include "replay_audit.h"
#include "virtual_clock.h"

namespace tessera::bench {
namespace {

using server::AssignmentState;

std::string outcome_of(server::Store& store, const std::string& id, const Issued& issued) {
    if (!issued.fate.empty()) {
        // The server's view of a unit its volunteer walked away from: timed out, or not yet.
        auto record = store.assignment(id);
        bool timed_out = record && *record && (*record)->state == AssignmentState::TimedOut;
        return issued.fate + (timed_out ? ":timed_out" : ":in_flight_at_end");
    }
    auto record = store.assignment(id);
    if (!record || !*record) return "unknown";
    switch ((*record)->state) {
        case AssignmentState::Merged: return "merged";
        case AssignmentState::Confirmed: return issued.samples == 0 ? "check_answered" : "replica";
        case AssignmentState::Accepted: return "buffered";
        case AssignmentState::Validated: return "awaiting_replica";
        case AssignmentState::Returned: return "returned";
        case AssignmentState::TimedOut: return "timed_out";
        case AssignmentState::Abandoned: return "abandoned";
        case AssignmentState::InProgress: return "in_flight_at_end";
        case AssignmentState::Rejected: {
            auto rejection = store.rejection_of(id);
            return "rejected:" + ((rejection && *rejection) ? (*rejection)->reason : std::string("?"));
        }
    }
    return "unknown";
}

// Each audited result's outcome by assignment (the audit events; a server's replay or a twin's
// comparison): passed, overruled (passed, a statistical check's flag overruled) or failed.
common::Result<std::map<std::string, std::string>> audits_of(server::Store& store) {
    auto events = store.latest_events({"audit_passed", "audit_failed"}, std::numeric_limits<int>::max());
    if (!events) return events.error();
    std::map<std::string, std::string> audited;
    for (const auto& e : *events) {
        auto detail = boost::json::parse(e.detail_json).as_object();
        const auto* id = detail.if_contains("assignment_id");
        if (id == nullptr || !id->is_string()) continue;
        auto outcome = e.kind == "audit_failed" ? "failed" : detail.contains("flagged") ? "overruled" : "passed";
        audited[std::string(id->as_string())] = outcome;
    }
    return audited;
}

}  // namespace

common::Status account_outcomes(server::Store& store, const std::map<std::string, Issued>& issued, RunResult& result) {
    std::size_t stored = 0;
    std::map<std::string, std::vector<server::AssignmentRecord>> by_unit;
    for (auto state : server::all_assignment_states()) {
        auto records = store.in_state(state);
        if (!records) return records.error();
        stored += records->size();
        for (const auto& a : *records) by_unit[a.work_unit_id].push_back(a);
    }
    if (stored != issued.size())
        return common::make_error("the store holds " + std::to_string(stored) + " assignments, the simulator issued " +
                                  std::to_string(issued.size()));
    auto rejections = store.rejections(std::numeric_limits<int>::max());
    if (!rejections) return rejections.error();
    std::map<std::string, std::string> refusal_detail;
    for (const auto& r : *rejections) refusal_detail[r.assignment_id] = r.detail;
    auto audited = audits_of(store);
    if (!audited) return audited.error();
    for (const auto& [id, unit] : issued) {
        auto outcome = outcome_of(store, id, unit);
        ++result.outcomes.count[outcome];
        if (outcome.starts_with("rejected:")) ++result.attacks[unit.attack].refused[outcome.substr(9)];
        if (unit.fate.empty()) {
            auto record = store.assignment(id);
            if (record && *record && (*record)->returned_at)
                result.checked.push_back({id, unit.attack, unit.base_version, unit.local_steps,
                                          (*record)->gain_per_step, (*record)->alignment, outcome,
                                          *(*record)->returned_at - VirtualClock::kEpoch, refusal_detail[id],
                                          (*record)->client_id, server::audit_asked(**record), (*audited)[id]});
        }
        result.outcomes.seconds[outcome] += unit.seconds;
    }
    std::stable_sort(result.checked.begin(), result.checked.end(),
                     [](const auto& a, const auto& b) { return a.returned_at < b.returned_at; });
    // Timed-out assignments whose unit was handed to someone later.
    for (const auto& [unit, assignments] : by_unit)
        for (const auto& a : assignments) {
            if (a.state != AssignmentState::TimedOut) continue;
            for (const auto& b : assignments)
                if (b.issued_at >= a.deadline && b.id != a.id) {
                    ++result.reissued_after_timeout;
                    break;
                }
        }
    return {};
}

}  // namespace tessera::bench
