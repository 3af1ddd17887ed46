// The SQLite back end of Database: one file in WAL mode, opened by one process.
#pragma once

#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

#include "database.h"

struct sqlite3;
struct sqlite3_stmt;

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

    // Prepared statements are kept by their SQL and reused (SQLite parses and plans each
    // one once per connection, not once per call): a statement comes from here, or is
    // prepared, and goes back reset when its rows are done with.
    sqlite3_stmt* take_statement(std::string_view sql);
    void give_back(const std::string& sql, sqlite3_stmt* statement);

private:
    // Distinct statements kept; beyond it a statement is finalized after use (the server's
    // SQL is a fixed set of a few hundred texts).
    static constexpr std::size_t kCachedStatements = 512;

    sqlite3* db_ = nullptr;
    std::filesystem::path path_;
    std::unordered_map<std::string, std::vector<sqlite3_stmt*>> idle_statements_;
};

}  // namespace tessera::server
