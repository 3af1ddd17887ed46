// The server's state directory (docs/operations.md, "State directory"): the database, the
// server's signing key, the operator token file, blobs (served at /blobs) and received results.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "file_system.h"
#include "result.h"

namespace tessera::server {

class StateDir {
public:
    // `database_url` (--db): the database when it is not the directory's own SQLite file, e.g.
    // postgresql://… shared by several server processes (docs/scaling.md).
    explicit StateDir(std::filesystem::path root, std::string database_url = "")
        : root_(std::move(root)), database_url_(std::move(database_url)) {}
    const std::filesystem::path& root() const { return root_; }
    std::filesystem::path database() const { return root_ / "server.db"; }
    // The URL Store::connect opens: --db, else sqlite: and the directory's server.db.
    std::string database_url() const {
        return database_url_.empty() ? "sqlite:" + database().string() : database_url_;
    }
    std::filesystem::path signing_key() const { return root_ / "server_key.pem"; }
    std::filesystem::path operator_token() const { return root_ / "operator_token"; }
    std::filesystem::path blobs() const { return root_ / "blobs"; }
    std::filesystem::path results() const { return root_ / "results"; }
    std::filesystem::path result_file(const std::string& assignment_id) const {
        return results() / (assignment_id + ".delta");
    }
    // The moments a kept unit started from, sent for its replay audit (result_files.h).
    std::filesystem::path moments_file(const std::string& assignment_id) const {
        return results() / (assignment_id + ".moments");
    }

private:
    std::filesystem::path root_;
    std::string database_url_;
};

// What the state directory holds on disk, in bytes (the dashboard and /metrics show it: with
// retention it stays bounded).
struct StateUsage {
    std::uint64_t blobs = 0;     // checkpoints, patches, published models, shards
    std::uint64_t results = 0;   // received deltas not yet merged, or logged since the last checkpoint
    std::uint64_t database = 0;  // server.db and its WAL (0 with --db: the database is elsewhere)
    std::uint64_t total() const { return blobs + results + database; }
};
// Sizes as `files` lists them; a directory it cannot list counts nothing.
StateUsage state_usage(const StateDir& state, FileSystem& files = posix_file_system());

}  // namespace tessera::server
