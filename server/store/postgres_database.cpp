// PostgreSQL back end over libpq: parameters go as text with their types, results come back
// as text and are parsed by column.
#include "postgres_database.h"

#include <libpq-fe.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace tessera::server {
namespace {

// Type OIDs of the parameters (pg_type.h): bigint, double precision, text; 0 lets the server infer.
constexpr Oid kInt8 = 20;
constexpr Oid kFloat8 = 701;
constexpr Oid kText = 25;

using ResultPtr = std::unique_ptr<PGresult, decltype(&PQclear)>;

// Throws unless `result` succeeded; serialization failures and deadlocks are retryable.
void check(pg_conn* connection, PGresult* result, std::string_view sql) {
    auto status = PQresultStatus(result);
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) return;
    const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    std::string code = state ? state : "";
    std::string message = result ? PQresultErrorMessage(result) : PQerrorMessage(connection);
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.pop_back();
    bool retryable = code == "40001" || code == "40P01";
    throw DatabaseError("SQL failed (" + std::string(sql.substr(0, kSqlExcerptChars)) + "): " + message, retryable);
}

class PostgresRows : public Rows {
public:
    explicit PostgresRows(ResultPtr result) : result_(std::move(result)), count_(PQntuples(result_.get())) {}

    bool next() override { return ++row_ < count_; }
    bool is_null(int column) const override { return PQgetisnull(result_.get(), row_, column) != 0; }
    std::int64_t integer(int column) const override {
        if (is_null(column)) return 0;
        const char* value = PQgetvalue(result_.get(), row_, column);
        if (value[0] == 't' && value[1] == '\0') return 1;  // a boolean expression
        if (value[0] == 'f' && value[1] == '\0') return 0;
        std::int64_t number = 0;
        const char* end = value + std::char_traits<char>::length(value);
        auto [rest, error] = std::from_chars(value, end, number);
        if (error != std::errc() || rest != end) {
            // A numeric or double column read as an integer (SUM of integers is numeric).
            char* stop = nullptr;
            double real = std::strtod(value, &stop);
            if (stop == value) throw DatabaseError("column " + std::to_string(column) + " is not a number");
            return static_cast<std::int64_t>(real);
        }
        return number;
    }
    double real(int column) const override {
        if (is_null(column)) return 0;
        const char* value = PQgetvalue(result_.get(), row_, column);
        char* stop = nullptr;
        double number = std::strtod(value, &stop);
        if (stop == value) throw DatabaseError("column " + std::to_string(column) + " is not a number");
        return number;
    }
    std::string text(int column) const override {
        return std::string(PQgetvalue(result_.get(), row_, column),
                           static_cast<std::size_t>(PQgetlength(result_.get(), row_, column)));
    }

private:
    ResultPtr result_;
    int count_ = 0;
    int row_ = -1;
};

// The URL without its password, for messages.
std::string without_password(std::string_view url) {
    auto scheme = url.find("://");
    auto at = url.find('@');
    if (scheme == std::string_view::npos || at == std::string_view::npos) return std::string(url);
    auto colon = url.find(':', scheme + 3);
    if (colon == std::string_view::npos || colon > at) return std::string(url);
    return std::string(url.substr(0, colon)) + std::string(url.substr(at));
}

}  // namespace

std::string numbered_placeholders(std::string_view sql) {
    std::string out;
    out.reserve(sql.size() + 16);
    int next = 0;
    bool quoted = false;
    for (char c : sql) {
        if (c == '\'') quoted = !quoted;
        if (c == '?' && !quoted) {
            out += '$' + std::to_string(++next);
        } else {
            out += c;
        }
    }
    return out;
}

PostgresDatabase::PostgresDatabase(std::string_view url) : name_(without_password(url)) {
    connection_ = PQconnectdb(std::string(url).c_str());
    if (PQstatus(connection_) != CONNECTION_OK) {
        std::string message = connection_ ? PQerrorMessage(connection_) : "out of memory";
        while (!message.empty() && message.back() == '\n') message.pop_back();
        PQfinish(connection_);
        connection_ = nullptr;
        throw DatabaseError("cannot connect to " + name_ + ": " + message);
    }
    exec("SET client_min_messages = warning");
}

PostgresDatabase::~PostgresDatabase() { PQfinish(connection_); }

void PostgresDatabase::reconnect_if_lost() {
    if (PQstatus(connection_) != CONNECTION_BAD) return;
    // A restarted or failed-over database: what was prepared on the old connection is gone.
    PQreset(connection_);
    prepared_.clear();
    if (PQstatus(connection_) != CONNECTION_OK) {
        std::string message = PQerrorMessage(connection_);
        while (!message.empty() && message.back() == '\n') message.pop_back();
        throw DatabaseError("lost the connection to " + name_ + " and cannot connect again: " + message);
    }
    exec("SET client_min_messages = warning");
}

void PostgresDatabase::exec(std::string_view sql) {
    reconnect_if_lost();
    ResultPtr result(PQexec(connection_, std::string(sql).c_str()), &PQclear);
    check(connection_, result.get(), sql);
}

std::unique_ptr<Rows> PostgresDatabase::query(std::string_view sql, const std::vector<SqlValue>& params) {
    std::vector<std::string> texts(params.size());
    std::vector<const char*> values(params.size(), nullptr);
    std::vector<Oid> types(params.size(), 0);
    for (std::size_t i = 0; i < params.size(); ++i) {
        if (const auto* integer = std::get_if<std::int64_t>(&params[i])) {
            texts[i] = std::to_string(*integer);
            types[i] = kInt8;
        } else if (const auto* real = std::get_if<double>(&params[i])) {
            char buffer[32];
            std::snprintf(buffer, sizeof buffer, "%.17g", *real);
            texts[i] = buffer;
            types[i] = kFloat8;
        } else if (const auto* text = std::get_if<std::string>(&params[i])) {
            texts[i] = *text;
            types[i] = kText;
        } else {
            continue;  // NULL, its type inferred
        }
        values[i] = texts[i].c_str();
    }
    reconnect_if_lost();
    const auto& statement = prepared(std::string(sql), types);
    ResultPtr result(PQexecPrepared(connection_, statement.c_str(), static_cast<int>(params.size()), values.data(),
                                    nullptr, nullptr, 0),
                     &PQclear);
    check(connection_, result.get(), sql);
    const char* tuples = PQcmdTuples(result.get());
    changes_ = tuples && *tuples ? std::strtoll(tuples, nullptr, 10) : 0;
    return std::make_unique<PostgresRows>(std::move(result));
}

const std::string& PostgresDatabase::prepared(const std::string& sql, const std::vector<Oid>& types) {
    std::string key = sql;
    for (auto type : types) key += "," + std::to_string(type);
    auto found = prepared_.find(key);
    if (found != prepared_.end()) return found->second;
    auto name = "s" + std::to_string(prepared_.size() + 1);
    auto numbered = numbered_placeholders(sql);
    ResultPtr result(PQprepare(connection_, name.c_str(), numbered.c_str(), static_cast<int>(types.size()), types.data()),
                     &PQclear);
    check(connection_, result.get(), sql);
    return prepared_.emplace(std::move(key), std::move(name)).first->second;
}

bool PostgresDatabase::in_transaction() const {
    auto status = PQtransactionStatus(connection_);
    return status == PQTRANS_INTRANS || status == PQTRANS_INERROR || status == PQTRANS_ACTIVE;
}

std::int64_t PostgresDatabase::schema_version() {
    auto exists = query("SELECT to_regclass('schema_version') IS NOT NULL", {});
    exists->next();
    if (exists->integer(0) == 0) return 0;
    auto rows = query("SELECT version FROM schema_version", {});
    return rows->next() ? rows->integer(0) : 0;
}

void PostgresDatabase::set_schema_version(std::int64_t version) {
    exec("CREATE TABLE IF NOT EXISTS schema_version (version BIGINT NOT NULL)");
    exec("DELETE FROM schema_version");
    query("INSERT INTO schema_version(version) VALUES (?)", {version});
}

}  // namespace tessera::server
