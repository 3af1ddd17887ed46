// The server's state in SQLite (WAL, the default) or PostgreSQL (database.h): every SQL
// statement of the server lives in this module (store*.cpp), written once for both. Each
// public method is one transaction; a lifecycle transition also records its event and, for
// rejections, the reason. Thread-safe: on SQLite calls are serialised on one connection, on
// PostgreSQL each runs on a free connection of a small pool. Database failures come back as
// Errors ("database: ...").
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "connection_pool.h"
#include "records.h"
#include "result.h"

namespace tessera::server {

class Database;
class GroupCommit;

// Why an assignment left in_progress without a result: its deadline passed or its volunteer
// gave it up.
struct EndedAssignment {
    std::string assignment_id;
    std::string work_unit_id;
    bool work_unit_retired = false;
};

class Store {
public:
    // Opens the database at `path` (creating it when `create`), enables WAL and applies the
    // schema or migrations up to kSchemaVersion.
    static common::Result<std::unique_ptr<Store>> open(const std::filesystem::path& path, bool create);
    // Opens the database a URL names: `sqlite:PATH` or `postgresql://…` (database.h), with its
    // schema applied or migrated as above.
    static common::Result<std::unique_ptr<Store>> connect(const std::string& url, bool create);
    ~Store();

    static constexpr std::int64_t kSchemaVersion = 11;
    common::Result<std::int64_t> schema_version();
    // The database's size on disk: PostgreSQL's for the whole database; SQLite's pages (its
    // WAL not counted).
    common::Result<std::int64_t> database_bytes();

    // Settings (operator token hash, server key id).
    common::Status set_setting(const std::string& key, const std::string& value);
    common::Result<std::optional<std::string>> setting(const std::string& key);
    // Every setting whose key starts with `prefix`, by key.
    common::Result<std::vector<std::pair<std::string, std::string>>> settings_with_prefix(const std::string& prefix);
    common::Status remove_setting(const std::string& key);

    // Clients. Registering a known key returns the existing client (its name and version
    // updated, its first address kept). A new key is refused (nullopt) when `limit.max` (> 0)
    // volunteers registered from `address` since `limit.since`.
    common::Result<std::optional<ClientRecord>> register_client(const std::string& public_key, const std::string& name,
                                                                const std::string& client_version,
                                                                const std::string& address, std::int64_t now,
                                                                RegistrationLimit limit = {});
    common::Result<std::optional<ClientRecord>> client(const std::string& id);
    common::Status note_client_seen(const std::string& id, const std::string& device, double samples_per_s,
                                    std::int64_t now);
    // False when the nonce was already used: a replay. Forgets nonces older than twice the
    // window, at most once per window (the pruning scans the table).
    common::Result<bool> claim_nonce(const std::string& client_id, const std::string& nonce, std::int64_t now,
                                     std::int64_t window_s);
    common::Status set_client_banned(const std::string& id, bool banned, std::int64_t now);
    common::Result<std::vector<ClientRecord>> clients();  // by credit, highest first
    // New volunteers registered from `address` since `since` (the Sybil limit).
    common::Result<std::int64_t> registrations_from(const std::string& address, std::int64_t since);
    // Results of the volunteer refused since `since` (the quarantine rule), not counting
    // refusals that judge no delta (work_unit_retired, replica_unresolved).
    common::Result<std::int64_t> rejections_since(const std::string& client_id, std::int64_t since);
    // False when it already was (or was not); entering quarantine resets the valid streak.
    common::Result<bool> set_client_quarantined(const std::string& id, bool quarantined, const std::string& why,
                                                std::int64_t now);

    // Tasks, shards, model versions.
    common::Status create_task(const TaskRecord& task, const std::vector<ShardRecord>& shards,
                               const VersionRecord& version0);
    common::Result<std::optional<TaskRecord>> current_task();  // the newest unfinished task
    common::Result<std::optional<TaskRecord>> task(const std::string& id);
    common::Result<std::vector<TaskRecord>> tasks();
    // Pausing, resuming or finishing a task (an event records it).
    common::Status set_task_state(const std::string& id, TaskState state, std::int64_t now);
    // The task's share of work among the running tasks (the scheduler draws by weight).
    common::Status set_task_weight(const std::string& id, double weight);
    // The task's assignments not settled yet: issued, or returned and not yet merged or refused.
    common::Result<std::int64_t> results_in_flight(const std::string& task_id);
    // Whether the assignment's volunteer returned a result of the same task before this one.
    common::Result<bool> returned_before(const AssignmentRecord& a);
    common::Result<std::vector<ShardRecord>> shards(const std::string& task_id);
    common::Result<std::optional<VersionRecord>> version(const std::string& task_id, std::int64_t version);
    common::Result<std::vector<VersionRecord>> versions(const std::string& task_id);
    // Versions `after` + 1 … `through`, in order (a patch chain).
    common::Result<std::vector<VersionRecord>> versions_between(const std::string& task_id, std::int64_t after,
                                                                std::int64_t through);
    // The first and last versions whose published model is the blob `sha256` (with a publishing
    // cadence, the versions between two publications share the earlier one's model).
    struct BlobVersions {
        std::int64_t first = 0;
        std::int64_t last = 0;
    };
    common::Result<std::optional<BlobVersions>> versions_of_blob(const std::string& task_id, const std::string& sha256);
    // The task and first version whose published model is the blob `sha256`, if any.
    common::Result<std::optional<std::pair<std::string, std::int64_t>>> version_publishing(const std::string& sha256);
    // The newest version at or before `at_most` that is a checkpoint (a restart point).
    common::Result<std::optional<VersionRecord>> last_checkpoint(const std::string& task_id, std::int64_t at_most);
    // Results merged into versions `after` + 1 … `through`, in merge order (the true model's log).
    struct MergedResult {
        std::string assignment_id;
        std::int64_t merged_version = 0;
    };
    common::Result<std::vector<MergedResult>> merged_between(const std::string& task_id, std::int64_t after,
                                                             std::int64_t through);
    // Makes an existing version a checkpoint once its files are written (at shutdown).
    common::Status set_checkpoint(const std::string& task_id, std::int64_t version,
                                  const std::optional<std::string>& state_sha256,
                                  const std::optional<std::string>& optimizer_sha256);
    // Retention: versions before the newest `keep` checkpoints (and before the newest
    // checkpoint at or before any live unit's base) lose their files, except pinned ones; they
    // stay in the history as rows. Returns the files no version still needs, to be deleted.
    struct Retired {
        std::int64_t before = 0;  // the first version kept whole
        std::vector<std::string> files;
    };
    common::Result<Retired> retire_versions(const std::string& task_id, std::int64_t keep);
    // Pins or unpins a checkpoint; false when the version is not a checkpoint.
    common::Result<bool> set_pinned(const std::string& task_id, std::int64_t version, bool pinned);
    // Records a new version, moves the task to it and marks `merged` assignments merged. With
    // a `fence`, only while that lease is still the caller's (a deposed aggregator commits nothing).
    common::Status commit_version(const VersionRecord& version, const std::vector<std::string>& merged,
                                  const std::optional<LeaseClaim>& fence = std::nullopt);
    common::Status set_validation_result(const std::string& task_id, std::int64_t version,
                                         const ValidationResult& result);

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
    common::Result<std::vector<AssignmentRecord>> assignments_of(const std::string& work_unit_id);
    common::Result<std::int64_t> live_assignments(const std::string& work_unit_id);

    // Lifecycle transitions. Each returns false (or an empty list) when the assignment was
    // not in the state the transition starts from.
    // `claim`: the process that will validate the result (none: the first that claims it).
    common::Result<bool> record_return(const std::string& id, const std::string& delta_sha256, std::int64_t delta_bytes,
                                       const std::string& metrics_json, std::int64_t now,
                                       const ResultClaim& claim = {});
    // Claims up to `limit` returned results for `claim`, oldest first: those nobody holds, those
    // whose claim lapsed by `now`, and those of the `released` holders (processes known to be
    // gone). Two processes never claim the same result (on PostgreSQL the rows are locked and
    // skipped by a concurrent claim). Returns their ids.
    common::Result<std::vector<std::string>> claim_returned(const ResultClaim& claim, std::int64_t now,
                                                            std::size_t limit,
                                                            const std::vector<std::string>& released = {});
    // The processes that hold claims on returned results.
    common::Result<std::vector<std::string>> result_claim_holders();
    // Gives up `holder`'s claims on results still returned; returns how many.
    common::Result<std::int64_t> release_result_claims(const std::string& holder);
    common::Result<bool> mark_validated(const std::string& id, const CheckFigures& figures, std::int64_t now);
    // Accepted results are merged (`merge`) or confirm a twin that is (state confirmed).
    // Grants credit, extends the volunteer's valid streak, closes the unit when it has
    // enough accepted replicas. `concurrency`: the task's volunteers now, stored with it.
    common::Result<bool> accept(const std::string& id, const CheckFigures& figures, double credit, bool merge,
                                std::int64_t now, std::int64_t concurrency = 1);
    // `figures`: the gain per step and alignment the checks measured before refusing (the
    // norm is not kept for refused results).
    common::Result<bool> reject(const std::string& id, const std::string& reason, const std::string& detail,
                                std::int64_t now, std::int64_t max_failures, const CheckFigures& figures = {});
    // The task's in-progress assignments past their deadline time out.
    common::Result<std::vector<EndedAssignment>> expire_overdue(const std::string& task_id, std::int64_t now,
                                                                std::int64_t max_failures);
    common::Result<std::optional<EndedAssignment>> abandon(const std::string& id, std::int64_t now,
                                                           std::int64_t max_failures);

    // What the validator and aggregator resume with after a restart.
    common::Result<std::vector<AssignmentRecord>> in_state(AssignmentState state);
    common::Result<std::vector<AssignmentRecord>> accepted_unmerged(const std::string& task_id);
    // ‖Δ‖ / local steps of the most recent accepted results (units differ in length).
    common::Result<std::vector<double>> recent_norms_per_step(const std::string& task_id, int limit);
    // Gains per step of the most recent results given the proof of training, accepted or not
    // (so the margin follows the model as honest gains shrink), newest first; only those of
    // units based on `min_base_version` or later.
    common::Result<std::vector<double>> recent_gains_per_step(const std::string& task_id, int limit,
                                                              std::int64_t min_base_version = 0);
    // What the stall guard judges a check by (store_checks.cpp): when the task last merged a
    // result, and the refusals on `reason` since then.
    common::Result<StallFigures> stall_figures(const std::string& task_id, const std::string& reason);
    // Alignments (cosines with the consensus) of the most recent results that passed the
    // checks, newest first: what honest results show now (refused ones are left out, so that
    // refused noise cannot lower the bar).
    common::Result<std::vector<double>> recent_alignments(const std::string& task_id, int limit);
    // Results of the task accepted for merging (accepted or merged) that returned at `since` or later.
    common::Result<std::int64_t> merges_since(const std::string& task_id, std::int64_t since);
    // How many results a replicated unit needs (a tie-break raises it; a settled quorum sets it
    // to the results accepted, so the unit is done).
    common::Status set_replicas(const std::string& work_unit_id, std::int64_t replicas);
    // Validated results whose twin has not come back within `wait_s` and is not in progress.
    common::Result<std::vector<AssignmentRecord>> lonely_validated(const std::string& task_id, std::int64_t now,
                                                                   std::int64_t wait_s);

    // Leases (store_leases.cpp): a role one server process holds at a time, such as a task's
    // aggregator. Takes or renews lease `claim.name` for `claim.holder` until `expires_at` when
    // it is free, expired at `now`, or already the holder's; true when the holder has it now.
    common::Result<bool> claim_lease(const LeaseClaim& claim, std::int64_t now, std::int64_t expires_at);
    // Gives it up (at shutdown: another process need not wait for it to expire).
    common::Status release_lease(const LeaseClaim& claim);
    common::Result<std::optional<LeaseRecord>> lease(const std::string& name);

    // Observation.
    common::Status add_event(const std::string& kind, const std::string& detail_json, std::int64_t now);
    common::Result<std::vector<EventRecord>> events_after(std::int64_t after_id, int limit);
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

    // Files the database refers to: model and optimizer blobs and shards (kept), and the
    // deltas of results still to be validated or merged.
    common::Result<std::set<std::string>> referenced_blobs();
    common::Result<std::set<std::string>> pending_delta_ids();

private:
    explicit Store(std::unique_ptr<Database> db);
    void migrate();
    // Runs `body` on a free connection of `pool` (store_internal.h): `guarded` on a writer
    // (on SQLite in the next group commit), `reading` (a call that only reads) on a reader.
    template <class F>
    auto guarded_on(ConnectionPool& pool, F&& body) -> decltype(body());
    template <class F>
    auto guarded(F&& body) -> decltype(body());
    template <class F>
    auto reading(F&& body) -> decltype(body()) {
        return guarded_on(readers_.empty() ? writers_ : readers_, std::forward<F>(body));
    }
    // The connection of the call running on this thread.
    static Database& db();

    // Writers: one connection for SQLite (its writes are serialised); kPostgresConnections for
    // PostgreSQL, whose transactions run in parallel, each call on a free one. Readers (SQLite
    // only; PostgreSQL reads on its writers): kSqliteReaders connections that only read, each
    // on its own snapshot of the WAL, so reads neither wait for the writer nor hold it.
    static constexpr std::size_t kPostgresConnections = 8;
    static constexpr std::size_t kSqliteReaders = 4;
    ConnectionPool writers_;
    ConnectionPool readers_;
    std::unique_ptr<GroupCommit> group_;  // SQLite's writes
    std::atomic<std::int64_t> nonces_pruned_at_{0};
};

}  // namespace tessera::server
