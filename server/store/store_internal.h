// Shared by the store's .cpp files: the lock-and-catch wrapper, row readers and names.
#pragma once

#include <boost/json.hpp>

#include <functional>
#include <optional>
#include <set>

#include "database.h"
#include "group_commit.h"
#include "store.h"

namespace tessera::server {

// The connection a call on this thread holds (set by ConnectionLease).
extern thread_local Database* current_connection;

// Binds a connection to this thread for one store call, and gives it back after.
class ConnectionLease {
public:
    ConnectionLease(Database* connection, std::function<void(Database*)> give_back)
        : connection_(connection), give_back_(std::move(give_back)) {
        current_connection = connection;
    }
    ~ConnectionLease() {
        current_connection = nullptr;
        give_back_(connection_);
    }
    ConnectionLease(const ConnectionLease&) = delete;
    ConnectionLease& operator=(const ConnectionLease&) = delete;

private:
    Database* connection_;
    std::function<void(Database*)> give_back_;
};

// Sleeps a random while that grows with `attempt` (to 100 ms), so that transactions that
// conflicted do not meet again at once.
void wait_before_retry(int attempt);

// Runs `body` on this thread's connection; a DatabaseError or a bad row becomes an Error.
// `threw`: whether it ended so (its writes are to be undone); `retry`: whether running it again
// may succeed (a conflict between PostgreSQL transactions).
template <class F>
auto run_caught(F& body, bool& threw, bool& retry) -> decltype(body()) {
    threw = true;
    retry = false;
    try {
        auto result = body();
        threw = false;
        return result;
    } catch (const DatabaseError& error) {
        retry = error.retryable();
        return common::make_error(std::string("database: ") + error.what());
    } catch (const std::exception& error) {
        return common::make_error(std::string("database: bad row: ") + error.what());
    }
}

// Runs `body` on a free connection of `pool`. A transaction that conflicted with another
// (PostgreSQL) runs again, a few times.
template <class F>
auto StoreCore::guarded_on(ConnectionPool& pool, F&& body) -> decltype(body()) {
    constexpr int kAttempts = 20;
    ConnectionLease lease(pool.acquire(), [&pool](Database* connection) { pool.release(connection); });
    for (int attempt = 1;; ++attempt) {
        bool threw = false;
        bool retry = false;
        auto result = run_caught(body, threw, retry);
        if (!retry || attempt >= kAttempts) return result;
        wait_before_retry(attempt);
    }
}

// A writing call: on SQLite in the next group commit (group_commit.h), else on a free writer.
template <class F>
auto StoreCore::guarded(F&& body) -> decltype(body()) {
    if (!group_) return guarded_on(writers_, std::forward<F>(body));
    std::optional<decltype(body())> result;
    bool threw = false;
    auto failure = group_->run([&] {
        bool retry = false;
        result.emplace(run_caught(body, threw, retry));
        return !threw;
    });
    // A call that failed itself says why; one that succeeded fails with its batch's COMMIT.
    if (failure.empty() || threw) return std::move(*result);
    return common::make_error("database: " + failure);
}

std::string_view work_unit_state_name(WorkUnitState state);
WorkUnitState work_unit_state_from_name(std::string_view name);

// Column lists and readers that pair with them.
inline constexpr int kAssignmentColumnCount = 20;
inline constexpr const char* kAssignmentColumns =
    "a.id, a.work_unit_id, a.client_id, a.state, a.issued_at, a.deadline, a.envelope, "
    "a.returned_at, a.delta_sha256, a.delta_bytes, a.delta_norm, a.metrics, a.credit, "
    "a.merged_version, w.task_id, w.base_version, a.gain_per_step, a.alignment, a.concurrency, a.full_rate_steps";
AssignmentRecord read_assignment(const Statement& row);

// What a claim appends to its SELECT: on PostgreSQL " FOR UPDATE [OF table] SKIP LOCKED" (the
// rows are locked; rows another transaction holds are skipped), on SQLite nothing (one writer).
std::string skip_locked(Database& db, std::string_view table = {});

// Moves one assignment between states; false when it was not in `from` (an SQL list).
bool transition(Database& db, const std::string& id, const char* from, const char* to);
std::string work_unit_of(Database& db, const std::string& assignment_id);
// Counts a failure against the unit; retires it at `max_failures`. True when retired.
bool count_failure(Database& db, const std::string& unit_id, std::int64_t max_failures, std::int64_t now);

// A task's columns as "tasks t" names them, and its reader (columns from `first` on).
inline constexpr const char* kTaskColumns = "t.id, t.config, t.state, t.created_at, t.version, t.weight";
inline constexpr int kTaskColumnCount = 6;
TaskRecord read_task(const Statement& row, int first = 0);

// A model version's columns as "model_versions v" names them, and its reader.
inline constexpr const char* kVersionColumns =
    "v.task_id, v.version, v.blob_sha256, v.blob_bytes, v.optimizer_sha256, v.created_at, v.merged_results, "
    "v.validation_loss, v.validation_accuracy, v.validation_samples, v.validation_full, v.state_sha256, "
    "v.patch_sha256, v.patch_bytes, v.checkpoint, v.pinned";
inline constexpr int kVersionColumnCount = 16;
VersionRecord read_version(const Statement& row, int first = 0);

// A work unit's columns as "work_units w" names them, and its reader.
inline constexpr const char* kWorkUnitColumns =
    "w.id, w.task_id, w.base_version, w.shards, w.local_steps, w.seed, w.replicas, w.state, w.failures, w.created_at, "
    "w.trusted_only, w.moments_sha256, w.moments_bytes, w.checks, w.checks_client, w.check_spec";
inline constexpr int kWorkUnitColumnCount = 16;
WorkUnitRecord read_work_unit(const Statement& row, int first = 0);
// Adds the blobs open loss-check units name (their `check` field's result and held-out shard).
void add_check_blobs(Database& db, std::set<std::string>& blobs);

// A volunteer's columns as "clients c" names them, and its reader.
inline constexpr const char* kClientColumns =
    "c.id, c.public_key, c.name, c.client_version, c.registered_at, c.last_seen, c.device, c.samples_per_s, "
    "c.valid_streak, c.accepted, c.rejected, c.credit, c.banned, c.quarantined, c.address";
inline constexpr int kClientColumnCount = 15;
ClientRecord read_client(const Statement& row, int first = 0);

// Adds a model version's row inside the caller's transaction.
void insert_version(Database& db, const VersionRecord& v);

// Adds an event row inside the caller's transaction.
void insert_event(Database& db, std::string_view kind, const boost::json::object& detail, std::int64_t now);

}  // namespace tessera::server
