// The store's record of what happened: events, refusals, counts and the dashboard's history
// (store.cpp, store_history.cpp). One part of Store (store.h): a component given only this part
// sees only these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

class HistoryStore : protected virtual StoreCore {
public:
    // Observation.
    common::Status add_event(const std::string& kind, const std::string& detail_json, std::int64_t now);
    common::Result<std::vector<EventRecord>> events_after(std::int64_t after_id, int limit);
    // The newest `limit` events of these kinds, newest first, and how many of each there are
    // (an index range each, schema 15's events_by_kind).
    common::Result<std::vector<EventRecord>> latest_events(const std::vector<std::string>& kinds, int limit);
    common::Result<std::map<std::string, std::int64_t>> event_counts(const std::vector<std::string>& kinds);
    common::Result<std::vector<RejectionRecord>> rejections(int limit);
    common::Result<std::optional<RejectionRecord>> rejection_of(const std::string& assignment_id);
    common::Result<StoreCounts> counts(std::int64_t active_since);
    // Volunteers seen since `since`, counted up to `at_most` (an index range, not a scan).
    common::Result<std::int64_t> active_clients(std::int64_t since, std::int64_t at_most);
    common::Result<std::int64_t> last_event_id();
    // Dashboard history (store_history.cpp): buckets of `bucket_s` seconds from `since`, only
    // those with results, oldest first.
    common::Result<std::vector<HistoryBucket>> history(const std::string& task_id, std::int64_t since,
                                                       std::int64_t bucket_s);
    common::Result<ActivityTotals> activity_since(const std::string& task_id, std::int64_t since);
    // Steps merged so far, and the volunteers issued one of the task's units since
    // `issued_since`: how many, and the fastest one's last reported speed.
    common::Result<RunProgress> run_progress(const std::string& task_id, std::int64_t issued_since);
    // Those volunteers alone (a result's concurrency when it is accepted).
    common::Result<std::int64_t> task_volunteers(const std::string& task_id, std::int64_t issued_since);
    // Merged results by staleness (the versions merged between a result's base and its merge).
    common::Result<std::map<std::int64_t, std::int64_t>> staleness_counts(const std::string& task_id);
    // All rejections by reason.
    common::Result<std::map<std::string, std::int64_t>> rejection_counts();

protected:
    HistoryStore() = default;
};

}  // namespace tessera::server
