// The store's work units and their assignments (store_work.cpp). One part of Store (store.h): a
// component given only this part sees only these calls.
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

// What a work request reads in one query: each task with its current version's record and the
// first version publishing that version's model (with a publishing cadence the current model
// may not be published yet), whether it has a unit the volunteer could be given again, and the
// volunteer's units in progress and the volunteers seen lately (up to two).
struct TaskAtWork {
    TaskRecord task;
    std::optional<VersionRecord> current;  // none only in a damaged database
    std::int64_t published_version = 0;
    bool reissuable = false;  // an open unit with a free replica slot the volunteer has not held
};
struct WorkView {
    std::vector<TaskAtWork> tasks;  // in creation order
    std::int64_t in_flight = 0;
    std::int64_t active_clients = 0;  // seen since `active_since`, counted up to 2
};

class WorkStore : protected virtual StoreCore {
public:
    // The view a work request of `client_id` starts from (one read).
    common::Result<WorkView> work_view(const std::string& client_id, std::int64_t active_since);
    // Work units and assignments. An assignment is a claim, decided in its own transaction, so
    // that concurrent requests (threads or processes) need no lock around the scheduler: it is
    // made only while its volunteer holds fewer than `max_in_flight` units in progress (Busy
    // otherwise) and, for an existing unit, while the unit is open with a free replica slot
    // (Taken otherwise: another request gave it out since the scheduler found it free).
    enum class Claim { Made, Taken, Busy };
    common::Result<Claim> create_work_unit(const WorkUnitRecord& unit, const AssignmentRecord& first,
                                           std::int64_t max_in_flight = kNoInFlightLimit);
    // A further assignment of an open unit; `rebase_to` moves an unreplicated unit with no
    // live assignment onto a newer model version first.
    common::Result<Claim> add_assignment(const AssignmentRecord& assignment, std::optional<std::int64_t> rebase_to,
                                         std::int64_t max_in_flight = kNoInFlightLimit);
    static constexpr std::int64_t kNoInFlightLimit = std::int64_t{1} << 62;
    // Open units with fewer live assignments than replicas that `client_id` has not held.
    common::Result<std::vector<WorkUnitRecord>> reissuable_work_units(const std::string& task_id,
                                                                      const std::string& client_id);
    common::Result<std::int64_t> in_flight(const std::string& client_id);
    // The tasks of a volunteer's units in progress (each once).
    common::Result<std::vector<std::string>> tasks_in_progress(const std::string& client_id);
    common::Result<std::optional<AssignmentRecord>> assignment(const std::string& id);
    common::Result<std::optional<WorkUnitRecord>> work_unit(const std::string& id);
    // Whether an open unit (an audit twin of a kept unit) resumes the moments blob `sha256`.
    common::Result<bool> moments_in_use(const std::string& sha256);
    common::Result<std::vector<AssignmentRecord>> assignments_of(const std::string& work_unit_id);
    common::Result<std::int64_t> live_assignments(const std::string& work_unit_id);
    // A loss-check unit (docs/operations.md, "Loss-check units"): `unit` with `checks` and
    // `checks_client` set, trusted volunteers only, one replica, no assignment yet (shards not
    // counted as used). False when a unit of its id exists already.
    common::Result<bool> create_check_unit(const WorkUnitRecord& unit);
    // Whether an open loss-check unit names the blob `sha256` (as its result or held-out shard).
    common::Result<bool> check_blob_in_use(const std::string& sha256);
    // Retires a unit if it is open (a loss-check unit whose result was judged without it).
    common::Status retire_open_unit(const std::string& id);

protected:
    WorkStore() = default;
};

}  // namespace tessera::server
