// Store::refresh_statistics: the planner's statistics of a PostgreSQL database kept up with
// its growth.
#include <algorithm>

#include "store.h"
#include "store_internal.h"

namespace tessera::server {

namespace {

constexpr std::chrono::seconds kLongestStatisticsInterval{600};
// The tables a run grows; the others stay small.
constexpr const char* kAnalyzeGrowing =
    "ANALYZE assignments, work_units, task_volunteers, model_versions, clients, request_nonces, events";

}  // namespace

common::Result<bool> Store::refresh_statistics(std::chrono::steady_clock::time_point now) {
    if (group_) return false;  // SQLite: its writes go through group commit, PostgreSQL's do not
    {
        std::lock_guard lock(statistics_mutex_);
        if (now < next_statistics_) return false;
        statistics_interval_ = std::min(statistics_interval_ * 2, kLongestStatisticsInterval);
        next_statistics_ = now + statistics_interval_;
    }
    return guarded_on(writers_, []() -> common::Result<bool> {
        db().exec(kAnalyzeGrowing);
        return true;
    });
}

}  // namespace tessera::server
