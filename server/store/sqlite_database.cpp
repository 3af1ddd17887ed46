// SQLite back end: every failing call becomes a DatabaseError naming the statement.
#include "sqlite_database.h"

#include <sqlite3.h>

namespace tessera::server {
namespace {

[[noreturn]] void fail(sqlite3* db, std::string_view what) {
    throw DatabaseError(std::string(what) + ": " + (db ? sqlite3_errmsg(db) : "out of memory"));
}

class SqliteRows : public Rows {
public:
    SqliteRows(sqlite3* db, std::string_view sql, const std::vector<SqlValue>& params) : db_(db) {
        if (sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &statement_, nullptr) != SQLITE_OK)
            fail(db, "cannot prepare " + std::string(sql.substr(0, 60)));
        for (std::size_t i = 0; i < params.size(); ++i) bind(static_cast<int>(i + 1), params[i]);
    }
    ~SqliteRows() override { sqlite3_finalize(statement_); }

    bool next() override {
        int rc = sqlite3_step(statement_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, "step " + std::string(sqlite3_sql(statement_)).substr(0, 60));
    }
    bool is_null(int column) const override { return sqlite3_column_type(statement_, column) == SQLITE_NULL; }
    std::int64_t integer(int column) const override { return sqlite3_column_int64(statement_, column); }
    double real(int column) const override { return sqlite3_column_double(statement_, column); }
    std::string text(int column) const override {
        const auto* text = sqlite3_column_text(statement_, column);
        return text ? std::string(reinterpret_cast<const char*>(text),
                                  static_cast<std::size_t>(sqlite3_column_bytes(statement_, column)))
                    : std::string();
    }

private:
    void bind(int index, const SqlValue& value) {
        int rc = SQLITE_OK;
        if (const auto* i = std::get_if<std::int64_t>(&value)) {
            rc = sqlite3_bind_int64(statement_, index, *i);
        } else if (const auto* d = std::get_if<double>(&value)) {
            rc = sqlite3_bind_double(statement_, index, *d);
        } else if (const auto* s = std::get_if<std::string>(&value)) {
            rc = sqlite3_bind_text(statement_, index, s->data(), static_cast<int>(s->size()), SQLITE_TRANSIENT);
        } else {
            rc = sqlite3_bind_null(statement_, index);
        }
        if (rc != SQLITE_OK) fail(db_, "bind");
    }

    sqlite3* db_;
    sqlite3_stmt* statement_ = nullptr;
};

}  // namespace

SqliteDatabase::SqliteDatabase(const std::filesystem::path& path, bool create) : path_(path) {
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
        std::string message = "cannot open database " + path.string();
        try {
            fail(db_, message);
        } catch (...) {
            sqlite3_close(db_);
            throw;
        }
    }
    sqlite3_busy_timeout(db_, 5000);
    sqlite3_extended_result_codes(db_, 1);
}

SqliteDatabase::~SqliteDatabase() { sqlite3_close(db_); }

void SqliteDatabase::exec(std::string_view sql) {
    std::string text(sql);
    char* message = nullptr;
    if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        std::string error = message ? message : "unknown error";
        sqlite3_free(message);
        throw DatabaseError("SQL failed (" + text.substr(0, 60) + "): " + error);
    }
}

std::unique_ptr<Rows> SqliteDatabase::query(std::string_view sql, const std::vector<SqlValue>& params) {
    return std::make_unique<SqliteRows>(db_, sql, params);
}

std::int64_t SqliteDatabase::changes() const { return sqlite3_changes(db_); }

bool SqliteDatabase::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t SqliteDatabase::schema_version() {
    SqliteRows rows(db_, "PRAGMA user_version", {});
    rows.next();
    return rows.integer(0);
}

void SqliteDatabase::set_schema_version(std::int64_t version) {
    exec("PRAGMA user_version = " + std::to_string(version));
}

}  // namespace tessera::server
