// sqlite3_backup_* page by page, retrying while a writer holds the database.
#include "sqlite_backup.h"

#include <sqlite3.h>

#include <chrono>
#include <thread>

namespace tessera::server {
namespace {

struct Connection {
    sqlite3* db = nullptr;
    ~Connection() { sqlite3_close(db); }
};

common::Status fail(const std::string& what, sqlite3* db) {
    return common::make_error(what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

}  // namespace

common::Status backup_sqlite(const std::filesystem::path& source, const std::filesystem::path& destination) {
    Connection from, to;
    if (sqlite3_open_v2(source.c_str(), &from.db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
        return fail("cannot open " + source.string(), from.db);
    if (sqlite3_open_v2(destination.c_str(), &to.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK)
        return fail("cannot create " + destination.string(), to.db);
    sqlite3_backup* backup = sqlite3_backup_init(to.db, "main", from.db, "main");
    if (backup == nullptr) return fail("cannot back up " + source.string(), to.db);
    int status = SQLITE_OK;
    for (int tries = 0; tries < 6000; ++tries) {  // a writer busy for up to a minute
        status = sqlite3_backup_step(backup, 256);
        if (status == SQLITE_DONE) break;
        if (status != SQLITE_OK && status != SQLITE_BUSY && status != SQLITE_LOCKED) break;
        if (status != SQLITE_OK) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    sqlite3_backup_finish(backup);
    if (status != SQLITE_DONE) return fail("backing up " + source.string() + " failed", to.db);
    sqlite3_stmt* check = nullptr;
    if (sqlite3_prepare_v2(to.db, "PRAGMA integrity_check", -1, &check, nullptr) != SQLITE_OK)
        return fail("cannot check " + destination.string(), to.db);
    std::string verdict;
    if (sqlite3_step(check) == SQLITE_ROW) verdict = reinterpret_cast<const char*>(sqlite3_column_text(check, 0));
    sqlite3_finalize(check);
    if (verdict != "ok") return common::make_error(destination.string() + " failed its integrity check: " + verdict);
    return {};
}

}  // namespace tessera::server
