// Backups of a server's state directory (docs/operations.md, "Backups"): the database — a
// SQLite file copied live with SQLite's backup API, or a PostgreSQL database dumped with
// pg_dump — the server's key and operator token, the blobs and the logged results, into a new
// folder; a restore copies a backup into a new state directory (and pg_restore's the dump into
// an empty PostgreSQL database). Both check that what a restart needs is there: for every
// task, its newest checkpoint's files, the patches after it, and its shards (a PostgreSQL
// backup is checked when it is restored: its dump is only readable then).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "file_system.h"
#include "result.h"
#include "state_dir.h"

namespace tessera::server {

struct BackupReport {
    std::int64_t tasks = 0;
    std::int64_t files = 0;  // blobs and results copied
    std::uint64_t bytes = 0;
};

// Where pg_dump and pg_restore are: a folder, or empty for the PATH.
struct PostgresTools {
    std::filesystem::path bin_dir;
};

// Backs `state` (it may be serving) up into `destination`, which must not exist or be empty.
// Files are copied through `files` (a test's may fail a chosen write).
common::Result<BackupReport> back_up_state(const StateDir& state, const std::filesystem::path& destination,
                                           const PostgresTools& tools = {}, FileSystem& files = posix_file_system());
// Copies the backup in `backup` into `target` (which must not exist or be empty), checked first.
// A PostgreSQL backup needs `target` to name an empty PostgreSQL database (--db), a SQLite
// backup a target without one.
common::Result<BackupReport> restore_state(const std::filesystem::path& backup, const StateDir& target,
                                           const PostgresTools& tools = {}, FileSystem& files = posix_file_system());
// Whether the state directory holds every file a restart of each task needs.
common::Result<BackupReport> check_restart_files(const StateDir& state);

}  // namespace tessera::server
