// Backups of a server's state directory (docs/operations.md, "Backups"): the SQLite database
// copied live with SQLite's backup API, the server's key and operator token, the blobs and the
// logged results, into a new folder; a restore copies a backup into a new state directory.
// Both check that what a restart needs is there: for every task, its newest checkpoint's
// files, the patches after it, and its shards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "result.h"
#include "state_dir.h"

namespace tessera::server {

struct BackupReport {
    std::int64_t tasks = 0;
    std::int64_t files = 0;  // blobs and results copied
    std::uint64_t bytes = 0;
};

// Backs `state` (it may be serving) up into `destination`, which must not exist or be empty.
// A PostgreSQL database (--db) is refused: back it up with pg_dump.
common::Result<BackupReport> back_up_state(const StateDir& state, const std::filesystem::path& destination);
// Copies the backup in `backup` into `target` (which must not exist or be empty), checked first.
common::Result<BackupReport> restore_state(const std::filesystem::path& backup, const StateDir& target);
// Whether the state directory holds every file a restart of each task needs.
common::Result<BackupReport> check_restart_files(const StateDir& state);

}  // namespace tessera::server
