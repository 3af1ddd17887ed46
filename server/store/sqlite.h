// A thin RAII layer over the SQLite C API: a connection, prepared statements with bound
// values, and a transaction that rolls back unless committed (as SQLiteCpp's Transaction).
// Used only by the store module. Errors are thrown as SqliteError; the store catches them at
// its boundary. Not thread-safe: the store serialises access.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

struct sqlite3;
struct sqlite3_stmt;

namespace tessera::server {

class SqliteError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class SqliteDb {
public:
    // Opens (creating when asked) a database file.
    SqliteDb(const std::filesystem::path& path, bool create);
    ~SqliteDb();
    SqliteDb(const SqliteDb&) = delete;
    SqliteDb& operator=(const SqliteDb&) = delete;

    // Runs SQL with no parameters and no result rows (may hold several statements).
    void exec(std::string_view sql);
    std::int64_t last_insert_rowid() const;
    int changes() const;
    sqlite3* handle() const { return db_; }

private:
    sqlite3* db_ = nullptr;
};

// A prepared statement. bind() indexes start at 1, column() indexes at 0, as in SQLite.
class Statement {
public:
    Statement(SqliteDb& db, std::string_view sql);
    ~Statement();
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    Statement& bind(int index, std::int64_t value);
    Statement& bind(int index, int value) { return bind(index, std::int64_t{value}); }
    Statement& bind(int index, double value);
    Statement& bind(int index, std::string_view value);
    Statement& bind(int index, const std::string& value) { return bind(index, std::string_view(value)); }
    Statement& bind(int index, const char* value) { return bind(index, std::string_view(value)); }
    Statement& bind_null(int index);
    template <class T>
    Statement& bind(int index, const std::optional<T>& value) {
        return value ? bind(index, *value) : bind_null(index);
    }

    // Advances to the next row; false when done.
    bool step();
    // Runs a statement that returns no rows.
    void run();

    std::int64_t integer(int column) const;
    double real(int column) const;
    std::string text(int column) const;
    bool is_null(int column) const;
    std::optional<double> optional_real(int column) const;
    std::optional<std::int64_t> optional_integer(int column) const;

private:
    SqliteDb& db_;
    sqlite3_stmt* statement_ = nullptr;
};

// BEGIN IMMEDIATE on construction; ROLLBACK in the destructor unless commit() ran.
class Transaction {
public:
    explicit Transaction(SqliteDb& db);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

private:
    SqliteDb& db_;
    bool done_ = false;
};

}  // namespace tessera::server
