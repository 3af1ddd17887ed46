// Shared by the store's .cpp files: the lock-and-catch wrapper, row readers and names.
#pragma once

#include <boost/json.hpp>

#include <functional>

#include "database.h"
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

// Runs `body` on a free connection of `pool`; a DatabaseError becomes an Error. A transaction that
// conflicted with another (PostgreSQL) runs again, a few times.
template <class F>
auto Store::guarded_on(ConnectionPool& pool, F&& body) -> decltype(body()) {
    constexpr int kAttempts = 20;
    ConnectionLease lease(pool.acquire(), [&pool](Database* connection) { pool.release(connection); });
    for (int attempt = 1;; ++attempt) {
        try {
            return body();
        } catch (const DatabaseError& error) {
            if (error.retryable() && attempt < kAttempts) {
                wait_before_retry(attempt);
                continue;
            }
            return common::make_error(std::string("database: ") + error.what());
        } catch (const std::exception& error) {
            return common::make_error(std::string("database: bad row: ") + error.what());
        }
    }
}

std::string_view work_unit_state_name(WorkUnitState state);
WorkUnitState work_unit_state_from_name(std::string_view name);

// Column lists and readers that pair with them.
inline constexpr const char* kAssignmentColumns =
    "a.id, a.work_unit_id, a.client_id, a.state, a.issued_at, a.deadline, a.envelope, "
    "a.returned_at, a.delta_sha256, a.delta_bytes, a.delta_norm, a.metrics, a.credit, "
    "a.merged_version, w.task_id, w.base_version, a.gain_per_step, a.alignment, a.concurrency, a.full_rate_steps";
AssignmentRecord read_assignment(const Statement& row);

// Moves one assignment between states; false when it was not in `from` (an SQL list).
bool transition(Database& db, const std::string& id, const char* from, const char* to);
std::string work_unit_of(Database& db, const std::string& assignment_id);
// Counts a failure against the unit; retires it at `max_failures`. True when retired.
bool count_failure(Database& db, const std::string& unit_id, std::int64_t max_failures, std::int64_t now);

inline constexpr const char* kWorkUnitColumns =
    "id, task_id, base_version, shards, local_steps, seed, replicas, state, failures, created_at";
WorkUnitRecord read_work_unit(const Statement& row);

// Adds a model version's row inside the caller's transaction.
void insert_version(Database& db, const VersionRecord& v);

// Adds an event row inside the caller's transaction.
void insert_event(Database& db, std::string_view kind, const boost::json::object& detail, std::int64_t now);

}  // namespace tessera::server
