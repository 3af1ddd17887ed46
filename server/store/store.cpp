// The store's lifecycle (open, WAL, schema migrations), settings, events and counts.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "db_schema.h"
#include "db_schema_postgres.h"
#include "store_internal.h"

namespace tessera::server {

namespace {

constexpr std::array<std::string_view, 3> kWorkUnitStateNames = {"open", "done", "retired"};

}  // namespace

std::string_view work_unit_state_name(WorkUnitState state) {
    return kWorkUnitStateNames[static_cast<std::size_t>(state)];
}

WorkUnitState work_unit_state_from_name(std::string_view name) {
    for (std::size_t i = 0; i < kWorkUnitStateNames.size(); ++i)
        if (kWorkUnitStateNames[i] == name) return static_cast<WorkUnitState>(i);
    throw DatabaseError("unknown work unit state '" + std::string(name) + "'");
}

void insert_event(Database& db, std::string_view kind, const boost::json::object& detail, std::int64_t now) {
    Statement(db, "INSERT INTO events(at, kind, detail) VALUES (?, ?, ?)")
        .bind(1, now)
        .bind(2, kind)
        .bind(3, boost::json::serialize(detail))
        .run();
}

thread_local Database* current_connection = nullptr;

StoreCore::StoreCore() = default;
StoreCore::~StoreCore() = default;

Store::Store(std::unique_ptr<Database> db) : next_statistics_(std::chrono::steady_clock::now() + statistics_interval_) {
    writers_.add(std::move(db));
}
Store::~Store() = default;

void wait_before_retry(int attempt) {
    thread_local std::minstd_rand random(std::random_device{}());
    auto ceiling_ms = std::min(100, 1 << std::min(attempt, 7));
    std::uniform_int_distribution<int> draw(0, ceiling_ms * 1000);
    std::this_thread::sleep_for(std::chrono::microseconds(draw(random)));
}

Database& StoreCore::db() {
    if (current_connection == nullptr) throw DatabaseError("no connection is bound to this call");
    return *current_connection;
}

common::Result<std::unique_ptr<Store>> Store::open(const std::filesystem::path& path, bool create) {
    return connect("sqlite:" + path.string(), create);
}

namespace {

// SQLite reads the database file with read calls into its page cache, not through a memory map:
// once the per-unit reads were few, the map's page faults and remaps (the file grows with every
// checkpoint) cost more than the reads did — `tessera-bench dispatch` 183–187 WU/s with a 1 GiB
// map against 225–255 without (docs/benchmarks.md, 2026-12-04).
const std::string kSqliteMap = "PRAGMA mmap_size=0;";

}  // namespace

common::Result<std::unique_ptr<Store>> Store::connect(const std::string& url, bool create) {
    bool sqlite_path = !is_postgres_url(url) && (url.starts_with("sqlite:") || url.find("://") == std::string::npos);
    std::string name = sqlite_path ? url.substr(url.starts_with("sqlite:") ? 7 : 0) : "";
    if (!name.empty() && !create && !std::filesystem::exists(name))
        return common::make_error("no database at " + name + " (run `tessera-server init` first)");
    try {
        auto db = open_database(url, create);
        name = db->name();
        if (db->dialect() == Dialect::Sqlite)
            db->exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; " + kSqliteMap);
        bool postgres = db->dialect() == Dialect::Postgres;
        std::unique_ptr<Store> store(new Store(std::move(db)));
        {
            auto& writers = store->writers_;
            ConnectionLease lease(writers.acquire(), [&](Database* connection) { writers.release(connection); });
            store->migrate();
        }
        for (std::size_t i = 1; postgres && i < kPostgresConnections; ++i)
            store->writers_.add(open_database(url, false));
        if (!postgres) store->group_ = std::make_unique<GroupCommit>(store->writers_);
        for (std::size_t i = 0; !postgres && i < kSqliteReaders; ++i) {
            auto reader = open_database(url, false);
            reader->exec("PRAGMA query_only=ON; " + kSqliteMap);
            store->readers_.add(std::move(reader));
        }
        return store;
    } catch (const DatabaseError& error) {
        return common::make_error("database" + (name.empty() ? ": " : " " + name + ": ") + error.what());
    }
}

// Schema versions: 0 = empty, 17 = schemas/db.sql (SQLite) and schemas/db_postgres.sql. SQLite
// files of older servers are migrated: 1 → 2 adds the evaluation's sample size to
// model_versions, 2 → 3 the indexes of open work units, clients by last seen, nonces by time
// and assignments by acceptance, 3 → 4 the contribution checks' columns (quarantine,
// registration address, gain per step) and their indexes, 4 → 5 the downlink patches'
// columns of model_versions (state, patch) and its index by blob, 5 → 6 the checkpoint and
// pinned flags, 6 → 7 (both back ends; PostgreSQL support began at 6) the leases table and
// the tasks' weights, 7 → 8 (both) the alignment figure of assignments, 8 → 9 (both) the
// concurrency stamped on accepted results, 9 → 10 (both) the results' steps at the full learning
// rate (the checks' per-step figures), 10 → 11 (both) the validation claim of a returned result,
// 11 → 12 (both) the task's volunteers by their last unit (filled from the assignments) and the
// results by return, 12 → 13 (both) the results' commitments, 13 → 14 (both) the audit twins'
// trusted_only flag of work units, 14 → 15 (both) the index of events by kind, 15 → 16 (both)
// the moments an audit twin of a kept unit resumes, 16 → 17 (both) the result a loss-check unit
// evaluates, its volunteer and the check's blobs. A database from a newer server is refused.
namespace {

// Schema 7's additions, as in both schema files (BIGINT and REAL are 64-bit on both).
constexpr const char* kSchema7Sql =
    "CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at BIGINT NOT NULL); "
    "ALTER TABLE tasks ADD COLUMN weight REAL NOT NULL DEFAULT 1;";
constexpr const char* kSchema8Sql = "ALTER TABLE assignments ADD COLUMN alignment DOUBLE PRECISION;";
constexpr const char* kSchema9Sql = "ALTER TABLE assignments ADD COLUMN concurrency BIGINT;";
constexpr const char* kSchema10Sql = "ALTER TABLE assignments ADD COLUMN full_rate_steps DOUBLE PRECISION;";
constexpr const char* kSchema11Sql =
    "ALTER TABLE assignments ADD COLUMN claimed_by TEXT; ALTER TABLE assignments ADD COLUMN claimed_until BIGINT;";
constexpr const char* kSchema12Sql =
    "CREATE INDEX assignments_by_return ON assignments(returned_at); "
    "CREATE TABLE task_volunteers (task_id TEXT NOT NULL REFERENCES tasks(id), client_id TEXT NOT NULL "
    "REFERENCES clients(id), last_issued_at BIGINT NOT NULL, PRIMARY KEY (task_id, client_id)); "
    "CREATE INDEX task_volunteers_by_issue ON task_volunteers(task_id, last_issued_at); "
    "INSERT INTO task_volunteers(task_id, client_id, last_issued_at) SELECT w.task_id, a.client_id, "
    "MAX(a.issued_at) FROM assignments a JOIN work_units w ON w.id = a.work_unit_id GROUP BY w.task_id, a.client_id;";

constexpr const char* kSchema13Sql = "ALTER TABLE assignments ADD COLUMN commitments TEXT;";
constexpr const char* kSchema14Sql = "ALTER TABLE work_units ADD COLUMN trusted_only BIGINT NOT NULL DEFAULT 0;";
constexpr const char* kSchema15Sql = "CREATE INDEX events_by_kind ON events(kind, id);";
constexpr const char* kSchema16Sql =
    "ALTER TABLE work_units ADD COLUMN moments_sha256 TEXT; "
    "ALTER TABLE work_units ADD COLUMN moments_bytes BIGINT NOT NULL DEFAULT 0;";
constexpr const char* kSchema17Sql =
    "ALTER TABLE work_units ADD COLUMN checks TEXT; ALTER TABLE work_units ADD COLUMN checks_client TEXT; "
    "ALTER TABLE work_units ADD COLUMN check_spec TEXT;";

// PostgreSQL databases began at schema 6.
void migrate_postgres(Database& db, std::int64_t version) {
    if (version < 6)
        throw DatabaseError("schema version " + std::to_string(version) + " has no migration on PostgreSQL");
    if (version < 7) db.exec(kSchema7Sql);
    if (version < 8) db.exec(kSchema8Sql);
    if (version < 9) db.exec(kSchema9Sql);
    if (version < 10) db.exec(kSchema10Sql);
    if (version < 11) db.exec(kSchema11Sql);
    if (version < 12) db.exec(kSchema12Sql);
    if (version < 13) db.exec(kSchema13Sql);
    if (version < 14) db.exec(kSchema14Sql);
    if (version < 15) db.exec(kSchema15Sql);
    if (version < 16) db.exec(kSchema16Sql);
    db.exec(kSchema17Sql);
}

void migrate_sqlite(Database& db, std::int64_t version) {
    if (version < 2)
        db.exec(
            "ALTER TABLE model_versions ADD COLUMN validation_samples INTEGER; "
            "ALTER TABLE model_versions ADD COLUMN validation_full INTEGER NOT NULL DEFAULT 0;");
    if (version < 3)
        db.exec(
            "CREATE INDEX IF NOT EXISTS work_units_open ON work_units(task_id, state, created_at); "
            "CREATE INDEX IF NOT EXISTS clients_by_last_seen ON clients(last_seen); "
            "CREATE INDEX IF NOT EXISTS request_nonces_by_time ON request_nonces(seen_at); "
            "CREATE INDEX IF NOT EXISTS assignments_by_acceptance ON assignments(accepted_seq);");
    if (version < 4)
        db.exec(
            "ALTER TABLE clients ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0; "
            "ALTER TABLE clients ADD COLUMN address TEXT NOT NULL DEFAULT ''; "
            "ALTER TABLE assignments ADD COLUMN gain_per_step REAL; "
            "CREATE INDEX IF NOT EXISTS clients_by_address ON clients(address, registered_at); "
            "CREATE INDEX IF NOT EXISTS rejections_by_client ON rejections(client_id, at);");
    if (version < 5)
        db.exec(
            "ALTER TABLE model_versions ADD COLUMN state_sha256 TEXT; "
            "ALTER TABLE model_versions ADD COLUMN patch_sha256 TEXT; "
            "ALTER TABLE model_versions ADD COLUMN patch_bytes INTEGER NOT NULL DEFAULT 0; "
            "CREATE INDEX IF NOT EXISTS model_versions_by_blob ON model_versions(task_id, blob_sha256);");
    if (version < 6)
        db.exec(
            "ALTER TABLE model_versions ADD COLUMN checkpoint INTEGER NOT NULL DEFAULT 1; "
            "ALTER TABLE model_versions ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0;");
    if (version < 7) db.exec(kSchema7Sql);
    if (version < 8) db.exec(kSchema8Sql);
    if (version < 9) db.exec(kSchema9Sql);
    if (version < 10) db.exec(kSchema10Sql);
    if (version < 11) db.exec(kSchema11Sql);
    if (version < 12) db.exec(kSchema12Sql);
    if (version < 13) db.exec(kSchema13Sql);
    if (version < 14) db.exec(kSchema14Sql);
    if (version < 15) db.exec(kSchema15Sql);
    if (version < 16) db.exec(kSchema16Sql);
    db.exec(kSchema17Sql);
}

}  // namespace

void Store::migrate() {
    // Server processes starting together on one PostgreSQL database apply the schema once,
    // under this advisory lock (a number of Tessera's own).
    static constexpr const char* kLockMigration = "SELECT pg_advisory_lock(7361001)";
    static constexpr const char* kUnlockMigration = "SELECT pg_advisory_unlock(7361001)";
    struct MigrationLock {
        Database& db;
        explicit MigrationLock(Database& db) : db(db) {
            if (db.dialect() == Dialect::Postgres) db.exec(kLockMigration);
        }
        ~MigrationLock() {
            if (db.dialect() != Dialect::Postgres) return;
            try {
                db.exec(kUnlockMigration);
            } catch (const DatabaseError&) {
                // The connection is gone; so is its lock.
            }
        }
    } lock(db());
    auto version = db().schema_version();
    if (version > kSchemaVersion)
        throw DatabaseError("schema version " + std::to_string(version) + " is newer than this server understands (" +
                            std::to_string(kSchemaVersion) + ")");
    if (version == kSchemaVersion) return;
    Transaction transaction(db());
    if (version == 0)
        db().exec(db().dialect() == Dialect::Postgres ? kPostgresSchemaSql : kDbSchemaSql);
    else if (db().dialect() == Dialect::Postgres)
        migrate_postgres(db(), version);
    else
        migrate_sqlite(db(), version);
    db().set_schema_version(kSchemaVersion);
    transaction.commit();
}

common::Result<std::int64_t> Store::database_bytes() {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement size(db(), db().dialect() == Dialect::Postgres
                                 ? "SELECT pg_database_size(current_database())"
                                 : "SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()");
        size.step();
        return size.integer(0);
    });
}

common::Result<std::int64_t> Store::schema_version() {
    return reading([&]() -> common::Result<std::int64_t> { return db().schema_version(); });
}

common::Status SettingStore::set_setting(const std::string& key, const std::string& value) {
    return guarded([&]() -> common::Status {
        Statement(db(),
                  "INSERT INTO settings(key, value) VALUES (?, ?) "
                  "ON CONFLICT(key) DO UPDATE SET value = excluded.value")
            .bind(1, key)
            .bind(2, value)
            .run();
        return {};
    });
}

common::Result<std::optional<std::string>> SettingStore::setting(const std::string& key) {
    return reading([&]() -> common::Result<std::optional<std::string>> {
        Statement query(db(), "SELECT value FROM settings WHERE key = ?");
        query.bind(1, key);
        if (!query.step()) return std::optional<std::string>();
        return std::optional<std::string>(query.text(0));
    });
}

common::Status HistoryStore::add_event(const std::string& kind, const std::string& detail_json, std::int64_t now) {
    return guarded([&]() -> common::Status {
        Statement(db(), "INSERT INTO events(at, kind, detail) VALUES (?, ?, ?)")
            .bind(1, now)
            .bind(2, kind)
            .bind(3, detail_json)
            .run();
        return {};
    });
}

common::Result<std::vector<EventRecord>> HistoryStore::events_after(std::int64_t after_id, int limit) {
    return reading([&]() -> common::Result<std::vector<EventRecord>> {
        Statement query(db(), "SELECT id, at, kind, detail FROM events WHERE id > ? ORDER BY id LIMIT ?");
        query.bind(1, after_id).bind(2, limit);
        std::vector<EventRecord> events;
        while (query.step()) events.push_back({query.integer(0), query.integer(1), query.text(2), query.text(3)});
        return events;
    });
}

common::Result<std::vector<RejectionRecord>> HistoryStore::rejections(int limit) {
    return reading([&]() -> common::Result<std::vector<RejectionRecord>> {
        Statement query(db(),
                        "SELECT id, assignment_id, client_id, reason, detail, at FROM rejections "
                        "ORDER BY id DESC LIMIT ?");
        query.bind(1, limit);
        std::vector<RejectionRecord> rows;
        while (query.step())
            rows.push_back(
                {query.integer(0), query.text(1), query.text(2), query.text(3), query.text(4), query.integer(5)});
        return rows;
    });
}

common::Result<std::optional<RejectionRecord>> HistoryStore::rejection_of(const std::string& assignment_id) {
    return reading([&]() -> common::Result<std::optional<RejectionRecord>> {
        Statement query(db(),
                        "SELECT id, assignment_id, client_id, reason, detail, at FROM rejections "
                        "WHERE assignment_id = ? ORDER BY id DESC LIMIT 1");
        query.bind(1, assignment_id);
        if (!query.step()) return std::optional<RejectionRecord>();
        return std::optional<RejectionRecord>(RejectionRecord{query.integer(0), query.text(1), query.text(2),
                                                              query.text(3), query.text(4), query.integer(5)});
    });
}

common::Result<StoreCounts> HistoryStore::counts(std::int64_t active_since) {
    return reading([&]() -> common::Result<StoreCounts> {
        StoreCounts counts;
        for (auto state : all_assignment_states()) counts.assignments[std::string(assignment_state_name(state))] = 0;
        for (auto name : kWorkUnitStateNames) counts.work_units[std::string(name)] = 0;
        Statement by_state(db(), "SELECT state, COUNT(*) FROM assignments GROUP BY state");
        while (by_state.step()) counts.assignments[by_state.text(0)] = by_state.integer(1);
        Statement units(db(), "SELECT state, COUNT(*) FROM work_units GROUP BY state");
        while (units.step()) counts.work_units[units.text(0)] = units.integer(1);
        Statement clients(db(),
                          "SELECT COUNT(*), COALESCE(SUM(CASE WHEN last_seen >= ? THEN 1 ELSE 0 END), 0), "
                          "COALESCE(SUM(quarantined), 0) "
                          "FROM clients");
        clients.bind(1, active_since);
        clients.step();
        counts.clients = clients.integer(0);
        counts.clients_active = clients.integer(1);
        counts.clients_quarantined = clients.integer(2);
        Statement rejections(db(), "SELECT COUNT(*) FROM rejections");
        rejections.step();
        counts.rejections = rejections.integer(0);
        return counts;
    });
}

common::Result<std::int64_t> HistoryStore::active_clients(std::int64_t since, std::int64_t at_most) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(), "SELECT COUNT(*) FROM (SELECT 1 FROM clients WHERE last_seen >= ? LIMIT ?) AS recent");
        query.bind(1, since).bind(2, at_most);
        query.step();
        return query.integer(0);
    });
}

common::Result<std::set<std::string>> Store::referenced_blobs() {
    return reading([&]() -> common::Result<std::set<std::string>> {
        std::set<std::string> blobs;
        Statement query(db(),
                        // A retired version's published model is no longer needed (VersionStore::retire_versions).
                        "SELECT blob_sha256 FROM model_versions "
                        "WHERE checkpoint = 1 OR patch_sha256 IS NOT NULL OR pinned = 1 UNION "
                        "SELECT optimizer_sha256 FROM model_versions WHERE optimizer_sha256 IS NOT NULL "
                        "UNION SELECT state_sha256 FROM model_versions WHERE state_sha256 IS NOT NULL "
                        "UNION SELECT patch_sha256 FROM model_versions WHERE patch_sha256 IS NOT NULL "
                        "UNION SELECT sha256 FROM shards "
                        // An open audit twin's moments (twin_moments.h).
                        "UNION SELECT moments_sha256 FROM work_units WHERE moments_sha256 IS NOT NULL AND "
                        "state = 'open'");
        while (query.step()) blobs.insert(query.text(0));
        add_check_blobs(db(), blobs);
        return blobs;
    });
}

common::Result<std::set<std::string>> Store::pending_delta_ids() {
    return reading([&]() -> common::Result<std::set<std::string>> {
        std::set<std::string> ids;
        // Merged results after their task's last checkpoint are its true model's log.
        Statement query(db(),
                        "SELECT a.id FROM assignments a JOIN work_units w ON w.id = a.work_unit_id "
                        "WHERE a.state IN ('returned', 'validated', 'accepted') OR (a.state = 'merged' AND "
                        "a.merged_version > (SELECT MAX(version) FROM model_versions v "
                        "WHERE v.task_id = w.task_id AND v.checkpoint = 1))");
        while (query.step()) ids.insert(query.text(0));
        return ids;
    });
}

}  // namespace tessera::server
