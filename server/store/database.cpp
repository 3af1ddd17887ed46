// Statements, transactions and opening a database by URL, for both back ends.
#include "database.h"

#include <algorithm>
#include <atomic>
#include <cctype>

#include "postgres_database.h"
#include "sqlite_database.h"

namespace tessera::server {

std::string json_number(Dialect dialect, std::string_view column, std::string_view key) {
    if (dialect == Dialect::Postgres)
        return "CAST((" + std::string(column) + ")::jsonb ->> '" + std::string(key) + "' AS DOUBLE PRECISION)";
    return "json_extract(" + std::string(column) + ", '$." + std::string(key) + "')";
}

Statement& Statement::set(int index, SqlValue value) {
    if (index < 1) throw DatabaseError("bind: parameter indexes start at 1");
    auto at = static_cast<std::size_t>(index);
    if (params_.size() < at) params_.resize(at);
    params_[at - 1] = std::move(value);
    return *this;
}

namespace {

std::atomic<std::uint64_t> statements_run{0};
std::atomic<std::uint64_t> reads_run{0};
std::atomic<std::uint64_t> commits_made{0};

// Whether `sql` only reads: a SELECT, or a WITH query (the store writes none through WITH).
bool is_read(std::string_view sql) {
    auto start = sql.find_first_not_of(" \t\n");
    if (start == std::string_view::npos) return false;
    sql.remove_prefix(start);
    auto starts_with = [sql](std::string_view word) {
        return sql.size() >= word.size() && std::equal(word.begin(), word.end(), sql.begin(), [](char a, char b) {
                   return a == std::toupper(static_cast<unsigned char>(b));
               });
    };
    return starts_with("SELECT") || starts_with("WITH");
}

}  // namespace

DatabaseActivity database_activity() { return {statements_run.load(), reads_run.load(), commits_made.load()}; }

bool Statement::step() {
    if (!rows_) {
        rows_ = db_.query(sql_, params_);
        statements_run.fetch_add(1, std::memory_order_relaxed);
        if (is_read(sql_)) reads_run.fetch_add(1, std::memory_order_relaxed);
    }
    return rows_->next();
}

void Statement::run() {
    while (step()) {
    }
}

std::optional<double> Statement::optional_real(int column) const {
    if (is_null(column)) return std::nullopt;
    return real(column);
}

std::optional<std::int64_t> Statement::optional_integer(int column) const {
    if (is_null(column)) return std::nullopt;
    return integer(column);
}

Transaction::Transaction(Database& db, Isolation isolation) : db_(db), nested_(db.grouped()) {
    if (nested_)
        db_.exec("SAVEPOINT store_call");
    else
        db_.begin(isolation);
}

Transaction::~Transaction() {
    if (done_ || !db_.in_transaction()) return;  // a failed COMMIT may have ended it
    try {
        db_.exec(nested_ ? "ROLLBACK TO store_call; RELEASE store_call" : "ROLLBACK");
    } catch (const DatabaseError&) {
        // The connection is gone, and the transaction with it.
    }
}

void Transaction::commit() {
    db_.exec(nested_ ? "RELEASE store_call" : "COMMIT");
    done_ = true;
    if (!nested_) commits_made.fetch_add(1, std::memory_order_relaxed);
}

bool is_postgres_url(std::string_view url) {
    return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

std::unique_ptr<Database> open_database(std::string_view url, bool create) {
    if (is_postgres_url(url)) return std::make_unique<PostgresDatabase>(url);
    if (url.find("://") != std::string_view::npos && !url.starts_with("sqlite:"))
        throw DatabaseError("'" + std::string(url.substr(0, url.find("://"))) +
                            "' databases are not supported: use sqlite:PATH or postgresql://USER@HOST:PORT/DB");
    if (url.starts_with("sqlite:")) url.remove_prefix(7);
    return std::make_unique<SqliteDatabase>(std::filesystem::path(url), create);
}

}  // namespace tessera::server
