// A consistent copy of a live SQLite database with SQLite's online backup API: the server may
// keep writing while it runs (the copy is the database as of one moment).
#pragma once

#include <filesystem>

#include "result.h"

namespace tessera::server {

// Copies `source` (opened read-only) into the new file `destination`, then checks the copy with
// `PRAGMA integrity_check`.
common::Status backup_sqlite(const std::filesystem::path& source, const std::filesystem::path& destination);

}  // namespace tessera::server
