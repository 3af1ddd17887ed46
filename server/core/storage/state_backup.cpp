// Copy order for a live server: files, then the database as of one moment (SQLite's backup
// API, or pg_dump's snapshot), then the files again — every file the copied database refers to
// was on disk in one of the two passes (blobs are content-addressed and written before the
// rows that name them).
#include "state_backup.h"

#include <sys/stat.h>

#include <map>
#include <set>
#include <system_error>

#include "database.h"
#include "external_program.h"
#include "sqlite_backup.h"
#include "store.h"

namespace tessera::server {
namespace {

namespace fs = std::filesystem;

// A PostgreSQL backup's database: pg_dump's custom format, which pg_restore reads.
constexpr const char* kDumpName = "server.pgdump";

std::string tool(const PostgresTools& tools, const char* name) {
    return tools.bin_dir.empty() ? std::string(name) : (tools.bin_dir / name).string();
}

// `dir` must be a new or empty folder we can write; created with mode 0700.
common::Status prepare_empty_folder(const fs::path& dir, const std::string& what) {
    std::error_code error;
    if (fs::exists(dir, error)) {
        if (!fs::is_directory(dir, error)) return common::make_error(what + " " + dir.string() + " is not a folder");
        if (!fs::is_empty(dir, error))
            return common::make_error(what + " " + dir.string() + " is not empty: give a new or empty folder");
    } else if (!fs::create_directories(dir, error) || error) {
        return common::make_error("cannot create " + what + " " + dir.string() + ": " + error.message());
    }
    if (::chmod(dir.c_str(), 0700) != 0) return common::make_error("cannot write " + what + " " + dir.string());
    return {};
}

// Copies the regular files of `from` missing from (or of another size in) `to`, each streamed
// into place atomically (a backup cut short holds whole files only).
common::Status copy_new_files(FileSystem& files, const fs::path& from, const fs::path& to, BackupReport& report) {
    if (auto made = files.make_directories(to); !made) return made;
    auto listed = files.list(from);
    if (!listed) return listed.error();
    auto present = files.list(to);
    if (!present) return present.error();
    std::map<std::string, std::uint64_t> sizes;
    for (const auto& entry : *present) sizes[entry.name] = entry.bytes;
    for (const auto& entry : *listed) {
        if (entry.name.find(".tmp") != std::string::npos) continue;  // a write in progress
        if (auto found = sizes.find(entry.name); found != sizes.end() && found->second == entry.bytes) continue;
        if (auto copied = copy_file_atomic(files, from / entry.name, to / entry.name); !copied) {
            if (!files.exists(from / entry.name)) continue;  // removed meanwhile (retention)
            return common::make_error("cannot copy " + (from / entry.name).string() + ": " + copied.message());
        }
        ++report.files;
        report.bytes += entry.bytes;
    }
    return {};
}

common::Status copy_secret(const fs::path& from, const fs::path& to) {
    std::error_code error;
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, error);
    if (error) return common::make_error("cannot copy " + from.string() + ": " + error.message());
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, error);
    return {};
}

common::Status copy_files(FileSystem& files, const StateDir& from, const StateDir& to, BackupReport& report) {
    if (auto status = copy_new_files(files, from.blobs(), to.blobs(), report); !status) return status;
    return copy_new_files(files, from.results(), to.results(), report);
}

// A restored state directory is a new server: the aggregator leases the original held when the
// backup was taken are dropped, so it merges at once instead of waiting for them to expire.
// (The lease's name is aggregator_election.cpp's; test_backup fails if the two part.)
common::Status drop_leases(const StateDir& state) {
    auto store = Store::connect(state.database_url(), false);
    if (!store) return store.error();
    auto tasks = (*store)->tasks();
    if (!tasks) return tasks.error();
    for (const auto& task : *tasks) {
        auto lease = (*store)->lease("aggregator:" + task.id);
        if (!lease) return lease.error();
        if (*lease)
            if (auto status = (*store)->release_lease({(*lease)->name, (*lease)->holder}); !status) return status;
    }
    return {};
}

common::Status copy_secrets(const StateDir& from, const StateDir& to) {
    for (auto [source, target] :
         {std::pair{from.signing_key(), to.signing_key()}, std::pair{from.operator_token(), to.operator_token()}})
        if (auto status = copy_secret(source, target); !status) return status;
    return {};
}

common::Result<BackupReport> copy_state(FileSystem& files, const StateDir& from, const StateDir& to) {
    BackupReport report;
    if (auto status = copy_files(files, from, to, report); !status) return status.error();
    if (auto status = backup_sqlite(from.database(), to.database()); !status) return status.error();
    if (auto status = copy_files(files, from, to, report); !status) return status.error();
    if (auto status = copy_secrets(from, to); !status) return status.error();
    auto checked = check_restart_files(to);
    if (!checked) return checked.error();
    report.tasks = checked->tasks;
    return report;
}

// A server on PostgreSQL: the files around pg_dump's snapshot of the database.
common::Result<BackupReport> dump_state(FileSystem& files, const StateDir& state, const StateDir& to,
                                        const PostgresTools& tools) {
    auto store = Store::connect(state.database_url(), false);
    if (!store) return store.error();
    auto tasks = (*store)->tasks();
    if (!tasks) return tasks.error();
    if (auto status = prepare_empty_folder(to.root(), "the backup folder"); !status) return status.error();
    BackupReport report;
    if (auto status = copy_files(files, state, to, report); !status) return status.error();
    auto dump = to.root() / kDumpName;
    if (auto status = run_program({tool(tools, "pg_dump"), "--format=custom", "--no-owner", "--no-privileges",
                                   "--file=" + dump.string(), "--dbname=" + state.database_url()},
                                  "pg_dump");
        !status)
        return status.error();
    ::chmod(dump.c_str(), 0600);
    if (auto status = copy_files(files, state, to, report); !status) return status.error();
    if (auto status = copy_secrets(state, to); !status) return status.error();
    report.tasks = static_cast<std::int64_t>(tasks->size());
    return report;
}

// Whether the PostgreSQL database at `url` holds no tables of a server yet.
common::Status check_empty_database(const std::string& url) {
    try {
        auto db = open_database(url, false);
        if (db->schema_version() != 0)
            return common::make_error("the database " + db->name() +
                                      " holds a server's tables already: restore into an empty database");
    } catch (const DatabaseError& error) {
        return common::make_error(std::string("the database to restore into: ") + error.what());
    }
    return {};
}

// A PostgreSQL backup: the dump restored in one transaction into the empty database `target`
// names, checked against the backup's files, then the files.
common::Result<BackupReport> restore_dump(FileSystem& files, const fs::path& backup, const StateDir& target,
                                          const PostgresTools& tools) {
    if (!is_postgres_url(target.database_url()))
        return common::make_error(backup.string() +
                                  " holds a PostgreSQL dump: restore it into an empty PostgreSQL "
                                  "database, named with --db");
    if (auto status = check_empty_database(target.database_url()); !status) return status.error();
    if (auto status = prepare_empty_folder(target.root(), "the state directory"); !status) return status.error();
    if (auto status =
            run_program({tool(tools, "pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error",
                         "--single-transaction", "--dbname=" + target.database_url(), (backup / kDumpName).string()},
                        "pg_restore");
        !status)
        return status.error();
    // The restored rows against the backup's files, before any is copied.
    if (auto checked = check_restart_files(StateDir(backup, target.database_url())); !checked)
        return common::make_error("the backup in " + backup.string() + " is incomplete: " + checked.message() +
                                  " (its tables are in the database now: drop them before another restore)");
    BackupReport report;
    if (auto status = copy_files(files, StateDir(backup), target, report); !status) return status.error();
    if (auto status = copy_secrets(StateDir(backup), target); !status) return status.error();
    auto checked = check_restart_files(target);
    if (!checked) return checked.error();
    report.tasks = checked->tasks;
    if (auto status = drop_leases(target); !status) return status.error();
    return report;
}

}  // namespace

common::Result<BackupReport> check_restart_files(const StateDir& state) {
    auto store = Store::connect(state.database_url(), false);
    if (!store) return store.error();
    auto tasks = (*store)->tasks();
    if (!tasks) return tasks.error();
    BackupReport report;
    std::set<std::string> missing;
    auto need = [&](const std::optional<std::string>& sha256) {
        if (sha256 && !sha256->empty() && !fs::exists(state.blobs() / *sha256)) missing.insert(*sha256);
    };
    for (const auto& task : *tasks) {
        ++report.tasks;
        auto checkpoint = (*store)->last_checkpoint(task.id, task.version);
        if (!checkpoint) return checkpoint.error();
        if (!*checkpoint) return common::make_error("task " + task.id + " has no checkpoint to restart from");
        need((*checkpoint)->blob_sha256);
        need((*checkpoint)->state_sha256);
        need((*checkpoint)->optimizer_sha256);
        auto versions = (*store)->versions(task.id);
        if (!versions) return versions.error();
        for (const auto& v : *versions)
            if (v.version > (*checkpoint)->version) need(v.patch_sha256);
        auto shards = (*store)->shards(task.id);
        if (!shards) return shards.error();
        for (const auto& shard : *shards) need(shard.sha256);
    }
    if (!missing.empty())
        return common::make_error(std::to_string(missing.size()) + " file(s) a restart needs are missing from " +
                                  state.blobs().string() + ", e.g. " + *missing.begin());
    return report;
}

common::Result<BackupReport> back_up_state(const StateDir& state, const fs::path& destination,
                                           const PostgresTools& tools, FileSystem& files) {
    const bool postgres = is_postgres_url(state.database_url());
    if (!fs::exists(postgres ? state.signing_key() : state.database()))
        return common::make_error(state.root().string() + " is not a server's state directory");
    if (postgres) return dump_state(files, state, StateDir(destination), tools);
    if (auto status = prepare_empty_folder(destination, "the backup folder"); !status) return status.error();
    return copy_state(files, state, StateDir(destination));
}

common::Result<BackupReport> restore_state(const fs::path& backup, const StateDir& target, const PostgresTools& tools,
                                           FileSystem& files) {
    StateDir from(backup);
    if (!fs::exists(from.signing_key()) || (!fs::exists(from.database()) && !fs::exists(backup / kDumpName)))
        return common::make_error(backup.string() + " is not a backup (no server_key.pem, and no server.db or " +
                                  kDumpName + ")");
    if (fs::exists(backup / kDumpName)) return restore_dump(files, backup, target, tools);
    if (is_postgres_url(target.database_url()))
        return common::make_error(backup.string() + " holds a SQLite database: restore it without --db");
    if (auto checked = check_restart_files(from); !checked)
        return common::make_error("the backup in " + backup.string() + " is incomplete: " + checked.message());
    if (auto status = prepare_empty_folder(target.root(), "the state directory"); !status) return status.error();
    auto report = copy_state(files, from, target);
    if (!report) return report;
    if (auto status = drop_leases(target); !status) return status.error();
    return report;
}

}  // namespace tessera::server
