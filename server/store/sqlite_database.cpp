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
    SqliteRows(SqliteDatabase& owner, sqlite3* db, std::string_view sql, const std::vector<SqlValue>& params)
        : owner_(owner), db_(db), sql_(sql), statement_(owner.take_statement(sql)) {
        try {
            for (std::size_t i = 0; i < params.size(); ++i) bind(static_cast<int>(i + 1), params[i]);
        } catch (...) {
            owner_.give_back(sql_, statement_);
            throw;
        }
    }
    ~SqliteRows() override { owner_.give_back(sql_, statement_); }
    SqliteRows(const SqliteRows&) = delete;
    SqliteRows& operator=(const SqliteRows&) = delete;

    bool next() override {
        int rc = sqlite3_step(statement_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        fail(db_, "step " + std::string(sqlite3_sql(statement_)).substr(0, kSqlExcerptChars));
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

    SqliteDatabase& owner_;
    sqlite3* db_;
    std::string sql_;
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

SqliteDatabase::~SqliteDatabase() {
    for (auto& [sql, statements] : idle_statements_)
        for (auto* statement : statements) sqlite3_finalize(statement);
    sqlite3_close(db_);
}

sqlite3_stmt* SqliteDatabase::take_statement(std::string_view sql) {
    if (auto found = idle_statements_.find(std::string(sql));
        found != idle_statements_.end() && !found->second.empty()) {
        auto* statement = found->second.back();
        found->second.pop_back();
        return statement;
    }
    sqlite3_stmt* statement = nullptr;
    if (sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &statement, nullptr) != SQLITE_OK)
        fail(db_, "cannot prepare " + std::string(sql.substr(0, kSqlExcerptChars)));
    return statement;
}

void SqliteDatabase::give_back(const std::string& sql, sqlite3_stmt* statement) {
    // Reset ends the statement's read of the database, as finalizing would.
    sqlite3_reset(statement);
    sqlite3_clear_bindings(statement);
    auto found = idle_statements_.find(sql);
    if (found == idle_statements_.end() && idle_statements_.size() >= kCachedStatements) {
        sqlite3_finalize(statement);
        return;
    }
    if (found == idle_statements_.end()) found = idle_statements_.emplace(sql, std::vector<sqlite3_stmt*>{}).first;
    found->second.push_back(statement);
}

void SqliteDatabase::exec(std::string_view sql) {
    std::string text(sql);
    char* message = nullptr;
    if (sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message) != SQLITE_OK) {
        std::string error = message ? message : "unknown error";
        sqlite3_free(message);
        throw DatabaseError("SQL failed (" + text.substr(0, kSqlExcerptChars) + "): " + error);
    }
}

std::unique_ptr<Rows> SqliteDatabase::query(std::string_view sql, const std::vector<SqlValue>& params) {
    return std::make_unique<SqliteRows>(*this, db_, sql, params);
}

std::int64_t SqliteDatabase::changes() const { return sqlite3_changes(db_); }

bool SqliteDatabase::in_transaction() const { return sqlite3_get_autocommit(db_) == 0; }

std::int64_t SqliteDatabase::schema_version() {
    SqliteRows rows(*this, db_, "PRAGMA user_version", {});
    rows.next();
    return rows.integer(0);
}

void SqliteDatabase::set_schema_version(std::int64_t version) {
    exec("PRAGMA user_version = " + std::to_string(version));
}

}  // namespace tessera::server
