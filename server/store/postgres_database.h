// The PostgreSQL back end of Database (libpq): one connection (the store keeps a pool of
// them; several server processes may share the database). Statements are prepared on first
// use. Writing transactions are SERIALIZABLE: one that conflicts with another fails as
// retryable and the store runs it again. A lost connection is opened again at the next
// statement.
#pragma once

#include <unordered_map>

#include "database.h"

struct pg_conn;

namespace tessera::server {

class PostgresDatabase : public Database {
public:
    // Connects with a libpq URI (postgresql://user@host:port/db?...).
    explicit PostgresDatabase(std::string_view url);
    ~PostgresDatabase() override;
    PostgresDatabase(const PostgresDatabase&) = delete;
    PostgresDatabase& operator=(const PostgresDatabase&) = delete;

    Dialect dialect() const override { return Dialect::Postgres; }
    void exec(std::string_view sql) override;
    std::unique_ptr<Rows> query(std::string_view sql, const std::vector<SqlValue>& params) override;
    std::int64_t changes() const override { return changes_; }
    void begin(Isolation isolation) override {
        exec(isolation == Isolation::Serializable ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
                                                  : "BEGIN ISOLATION LEVEL READ COMMITTED");
    }
    bool in_transaction() const override;
    std::int64_t schema_version() override;  // the row of table schema_version, 0 without it
    void set_schema_version(std::int64_t version) override;
    std::string name() const override { return name_; }

private:
    // A connection the server closed (it restarted, or failed over) is opened again before
    // the next statement; the statement that found it closed has failed (it may have been a
    // COMMIT whose outcome is unknown, so nothing is retried here).
    void reconnect_if_lost();
    // The name of the statement prepared for `sql` with these parameter types (prepared on
    // first use: later runs skip parsing and planning).
    const std::string& prepared(const std::string& sql, const std::vector<unsigned>& types);

    pg_conn* connection_ = nullptr;
    std::string name_;
    std::int64_t changes_ = 0;
    std::unordered_map<std::string, std::string> prepared_;
};

// `?` placeholders as PostgreSQL's `$1`, `$2`, … (quoted text left alone).
std::string numbered_placeholders(std::string_view sql);

}  // namespace tessera::server
