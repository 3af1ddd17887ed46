// StallGuard: the stall condition read from the store, suspensions kept as settings.
#include "stall_guard.h"

#include <algorithm>
#include <array>
#include <charconv>

#include <boost/json.hpp>

#include "rejection_reasons.h"

namespace tessera::server {

namespace {

std::string key_of(const std::string& task_id, std::string_view reason) {
    return std::string(StallGuard::kSettingPrefix) + task_id + "/" + std::string(reason);
}

}  // namespace

common::Result<std::vector<SuspendedCheck>> suspended_checks(SettingStore& store, const std::string& task_id) {
    auto prefix = std::string(StallGuard::kSettingPrefix) + (task_id.empty() ? "" : task_id + "/");
    auto rows = store.settings_with_prefix(prefix);
    if (!rows) return rows.error();
    std::vector<SuspendedCheck> checks;
    for (const auto& [key, value] : *rows) {
        auto slash = key.rfind('/');  // task ids may hold a slash; reasons do not
        if (slash < StallGuard::kSettingPrefix.size())
            return common::make_error("setting " + key + " names no task and check");
        SuspendedCheck check{key.substr(StallGuard::kSettingPrefix.size(), slash - StallGuard::kSettingPrefix.size()),
                             key.substr(slash + 1), 0};
        auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), check.since);
        if (error != std::errc() || end != value.data() + value.size())
            return common::make_error("setting " + key + " is not a time: '" + value + "'");
        if (task_id.empty() || check.task_id == task_id) checks.push_back(std::move(check));
    }
    return checks;
}

bool StallGuard::suspendable(std::string_view why) {
    constexpr std::array<std::string_view, 5> kJudgedByRecentFigures = {
        reason::kNormTooLarge, reason::kNormTooSmall, reason::kMisaligned, reason::kNoImprovement,
        reason::kLossIncrease};
    return std::find(kJudgedByRecentFigures.begin(), kJudgedByRecentFigures.end(), why) !=
           kJudgedByRecentFigures.end();
}

common::Result<std::set<std::string>> StallGuard::suspended(const TaskView& task) {
    const auto& task_id = task.record.id;
    auto checks = suspended_checks(settings_, task_id);
    if (!checks) return checks.error();
    std::set<std::string> reasons;
    for (const auto& check : *checks) {
        auto merged = results_.merges_since(task_id, check.since);
        if (!merged) return merged.error();
        if (*merged < kRearmMerges) {
            reasons.insert(check.reason);
            continue;
        }
        if (auto removed = settings_.remove_setting(key_of(task_id, check.reason)); !removed) return removed.error();
        boost::json::object event{{"task_id", task_id}, {"reason", check.reason}, {"merged", *merged}};
        if (auto status = history_.add_event("check_restored", boost::json::serialize(event), clock_()); !status)
            return status.error();
    }
    return reasons;
}

common::Result<bool> StallGuard::note_refusal(const TaskView& task, std::string_view reason) {
    if (!suspendable(reason)) return false;
    const auto& task_id = task.record.id;
    auto key = key_of(task_id, reason);
    auto already = settings_.setting(key);
    if (!already) return already.error();
    if (*already) return false;
    auto figures = results_.stall_figures(task_id, std::string(reason));
    if (!figures) return figures.error();
    auto now = clock_();
    auto stalled_since = std::max(figures->last_merge_at.value_or(0), figures->first_refusal_at.value_or(now));
    if (figures->refusals < kStallRefusals || figures->volunteers < kStallVolunteers ||
        now - stalled_since < kStallSeconds)
        return false;
    if (auto status = settings_.set_setting(key, std::to_string(now)); !status) return status.error();
    boost::json::object event{{"task_id", task_id},
                              {"reason", std::string(reason)},
                              {"refused", figures->refusals},
                              {"volunteers", figures->volunteers},
                              {"stalled_s", now - stalled_since}};
    if (auto status = history_.add_event("check_suspended", boost::json::serialize(event), now); !status)
        return status.error();
    return true;
}

common::Result<bool> StallGuard::starved(const TaskView& task) {
    auto figures = results_.stall_figures(task.record.id, "");
    if (!figures) return figures.error();
    return figures->first_return_at && clock_() - *figures->first_return_at >= kStallSeconds;
}

}  // namespace tessera::server
