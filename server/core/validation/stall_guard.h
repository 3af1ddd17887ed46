// Keeps the contribution checks from stalling a task (docs/operations.md, "When a check
// stalls a task"). The checks that judge a result against figures of recent results — the
// norm bounds, the alignment with the consensus, the gain margin, the held-out loss — can end
// up refusing honest work, and a task that merges nothing never renews those figures. When a
// check has refused every result for a while (at least kStallRefusals refusals on its ground
// from kStallVolunteers volunteers, nothing merged for kStallSeconds), it is suspended for
// the task: results are judged without it until kRearmMerges results have been merged, and
// then it judges again (an idle task, with no results coming back, is never stalled). Suspensions are stored (settings `suspended_check/<task>/<reason>` =
// the time), so every process on the database sees them, with a `check_suspended` and a
// `check_restored` event. Thread-safe (the store is).
#pragma once

#include <set>
#include <string>
#include <string_view>

#include "clock.h"
#include "state_dir.h"
#include "store.h"
#include "task_lookup.h"

namespace tessera::server {

struct SuspendedCheck {
    std::string task_id;
    std::string reason;
    std::int64_t since = 0;
};

// The checks suspended now, of one task or (task_id empty) of every task; reading re-arms none.
common::Result<std::vector<SuspendedCheck>> suspended_checks(SettingStore& store, const std::string& task_id = "");

class StallGuard {
public:
    static constexpr std::int64_t kStallRefusals = 6;
    static constexpr std::int64_t kStallVolunteers = 2;
    static constexpr std::int64_t kStallSeconds = 300;
    static constexpr std::int64_t kRearmMerges = 20;
    static constexpr std::string_view kSettingPrefix = "suspended_check/";

    // Suspensions are kept as settings, judged by the results' figures, told as events.
    StallGuard(SettingStore& settings, ResultStore& results, HistoryStore& history, Clock clock)
        : settings_(settings), results_(results), history_(history), clock_(std::move(clock)) {}

    // The checks a guard may suspend: those judged against figures of recent results.
    static bool suspendable(std::string_view reason);

    // The checks suspended for the task now; re-arms those whose kRearmMerges merges are in.
    common::Result<std::set<std::string>> suspended(const TaskView& task);
    // Called after a refusal on `reason` was stored: suspends the check when the task is
    // stalled on it. True when it was suspended by this call.
    common::Result<bool> note_refusal(const TaskView& task, std::string_view reason);
    // Results have come back for kStallSeconds since the task last merged one (or since the
    // first, when it never did), and none was merged: the quarantine fallback's condition. An
    // idle task is not starved.
    common::Result<bool> starved(const TaskView& task);

private:
    SettingStore& settings_;
    ResultStore& results_;
    HistoryStore& history_;
    Clock clock_;
};

}  // namespace tessera::server
