// The SQLite back end of Database: one file in WAL mode, opened by one process.
#pragma once

#include <filesystem>

#include "database.h"

struct sqlite3;

namespace tessera::server {

class SqliteDatabase : public Database {
public:
    // Opens (creating when asked) a database file.
    SqliteDatabase(const std::filesystem::path& path, bool create);
    ~SqliteDatabase() override;
    SqliteDatabase(const SqliteDatabase&) = delete;
    SqliteDatabase& operator=(const SqliteDatabase&) = delete;

    Dialect dialect() const override { return Dialect::Sqlite; }
    void exec(std::string_view sql) override;
    std::unique_ptr<Rows> query(std::string_view sql, const std::vector<SqlValue>& params) override;
    std::int64_t changes() const override;
    void begin(Isolation) override { exec("BEGIN IMMEDIATE"); }
    bool in_transaction() const override;
    std::int64_t schema_version() override;  // PRAGMA user_version
    void set_schema_version(std::int64_t version) override;
    std::string name() const override { return path_.string(); }

private:
    sqlite3* db_ = nullptr;
    std::filesystem::path path_;
};

}  // namespace tessera::server
