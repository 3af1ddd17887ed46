// The server's state in SQLite (WAL, the default) or PostgreSQL (database.h): every SQL
// statement of the server lives in this module (store*.cpp), written once for both. Each
// public method is one transaction; a lifecycle transition also records its event and, for
// rejections, the reason. Thread-safe: on SQLite calls are serialised on one connection, on
// PostgreSQL each runs on a free connection of a small pool. Database failures come back as
// Errors ("database: ...").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_clients.h"
#include "store_history.h"
#include "store_leases.h"
#include "store_results.h"
#include "store_settings.h"
#include "store_tasks.h"
#include "store_versions.h"
#include "store_work.h"

namespace tessera::server {

// The whole store: every part below on one set of connections (store_core.h). Components that
// need one concern take that part (e.g. ResultStore&), the others the Store.
class Store : public SettingStore,
              public ClientStore,
              public TaskStore,
              public VersionStore,
              public WorkStore,
              public ResultStore,
              public LeaseStore,
              public HistoryStore {
public:
    // Opens the database at `path` (creating it when `create`), enables WAL and applies the
    // schema or migrations up to kSchemaVersion.
    static common::Result<std::unique_ptr<Store>> open(const std::filesystem::path& path, bool create);
    // Opens the database a URL names: `sqlite:PATH` or `postgresql://…` (database.h), with its
    // schema applied or migrated as above.
    static common::Result<std::unique_ptr<Store>> connect(const std::string& url, bool create);
    ~Store();

    static constexpr std::int64_t kSchemaVersion = 17;
    common::Result<std::int64_t> schema_version();
    // The database's size on disk: PostgreSQL's for the whole database; SQLite's pages (its
    // WAL not counted).
    common::Result<std::int64_t> database_bytes();

    // Files the database refers to: model and optimizer blobs and shards (kept), and the
    // deltas of results still to be validated or merged.
    common::Result<std::set<std::string>> referenced_blobs();
    common::Result<std::set<std::string>> pending_delta_ids();

    // PostgreSQL: refreshes the planner's statistics of the tables that grow with a run
    // (ANALYZE) once `now` reaches the next refresh: 5 s after the store opened, then at
    // doubling intervals up to every 10 minutes. A fresh database grows from empty faster than
    // autovacuum first looks at it (after a minute), and plans made for empty tables walk every
    // unit of a task (docs/benchmarks.md). True when it ran; on SQLite nothing (its queries fix
    // their plans).
    common::Result<bool> refresh_statistics(std::chrono::steady_clock::time_point now);

private:
    explicit Store(std::unique_ptr<Database> db);
    void migrate();

    std::mutex statistics_mutex_;
    std::chrono::seconds statistics_interval_{5};  // before next_statistics_: it starts from it
    std::chrono::steady_clock::time_point next_statistics_;
};

}  // namespace tessera::server
