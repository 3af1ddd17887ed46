// The store's connection to its database, behind one interface with two back ends: SQLite
// (one file, the default for one machine) and PostgreSQL (shared by several server
// processes; docs/scaling.md). Statements are written once in the SQL both accept, with `?`
// placeholders; the few constructs that differ come from the dialect's functions below.
// Errors are thrown as DatabaseError; the store catches them at its boundary. A connection is
// not thread-safe: the store serialises access.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tessera::server {

// How much of a failed statement's SQL its error quotes.
constexpr std::size_t kSqlExcerptChars = 60;

class DatabaseError : public std::runtime_error {
public:
    explicit DatabaseError(const std::string& what, bool retryable = false)
        : std::runtime_error(what), retryable_(retryable) {}
    // A serialization failure or deadlock between concurrent transactions: running the whole
    // transaction again may succeed.
    bool retryable() const { return retryable_; }

private:
    bool retryable_ = false;
};

enum class Dialect { Sqlite, Postgres };

// The number at `key` of the JSON object in text column `column`, NULL when absent.
std::string json_number(Dialect dialect, std::string_view column, std::string_view key);

using SqlValue = std::variant<std::monostate, std::int64_t, double, std::string>;

// The rows of one executed statement. Column indexes start at 0.
class Rows {
public:
    virtual ~Rows() = default;
    virtual bool next() = 0;  // advances to the next row; false when done
    virtual bool is_null(int column) const = 0;
    virtual std::int64_t integer(int column) const = 0;  // a boolean reads as 0 or 1
    virtual double real(int column) const = 0;
    virtual std::string text(int column) const = 0;
};

// How a PostgreSQL transaction is isolated (SQLite's write transactions are serial anyway).
enum class Isolation { Serializable, ReadCommitted };

class Database {
public:
    virtual ~Database() = default;
    virtual Dialect dialect() const = 0;
    // Runs SQL with no parameters and no result rows (may hold several statements).
    virtual void exec(std::string_view sql) = 0;
    // Runs one statement with `?` placeholders bound to `params`, in order.
    virtual std::unique_ptr<Rows> query(std::string_view sql, const std::vector<SqlValue>& params) = 0;
    // Rows changed by the last statement once it has run to its end.
    virtual std::int64_t changes() const = 0;
    // Starts a transaction that writes (SQLite: BEGIN IMMEDIATE; PostgreSQL: serializable, or
    // read committed where the statements lock the rows they depend on themselves).
    virtual void begin(Isolation isolation = Isolation::Serializable) = 0;
    // Whether a transaction is open (PostgreSQL ends one whose COMMIT failed; SQLite may not).
    virtual bool in_transaction() const = 0;
    // The schema version the database holds (0: empty) and setting it inside a transaction.
    virtual std::int64_t schema_version() = 0;
    virtual void set_schema_version(std::int64_t version) = 0;
    // The database's own description for messages: a path, or a URL without its password.
    virtual std::string name() const = 0;

    // Inside a group commit's transaction (group_commit.h), a Transaction is a savepoint in it.
    bool grouped() const { return grouped_; }
    void set_grouped(bool grouped) { grouped_ = grouped; }

private:
    bool grouped_ = false;
};

// A statement with values bound by index (from 1, as in SQLite); it runs at the first step().
class Statement {
public:
    Statement(Database& db, std::string_view sql) : db_(db), sql_(sql) {}

    Statement& bind(int index, std::int64_t value) { return set(index, value); }
    Statement& bind(int index, int value) { return set(index, std::int64_t{value}); }
    Statement& bind(int index, double value) { return set(index, value); }
    Statement& bind(int index, std::string_view value) { return set(index, std::string(value)); }
    Statement& bind(int index, const std::string& value) { return set(index, value); }
    Statement& bind(int index, const char* value) { return set(index, std::string(value)); }
    Statement& bind_null(int index) { return set(index, std::monostate{}); }
    template <class T>
    Statement& bind(int index, const std::optional<T>& value) {
        return value ? bind(index, *value) : bind_null(index);
    }

    // Advances to the next row; false when done.
    bool step();
    // Runs a statement that returns no rows (or ignores them).
    void run();

    std::int64_t integer(int column) const { return rows_->integer(column); }
    double real(int column) const { return rows_->real(column); }
    std::string text(int column) const { return rows_->text(column); }
    bool is_null(int column) const { return rows_->is_null(column); }
    std::optional<double> optional_real(int column) const;
    std::optional<std::int64_t> optional_integer(int column) const;

private:
    Statement& set(int index, SqlValue value);

    Database& db_;
    std::string sql_;
    std::vector<SqlValue> params_;
    std::unique_ptr<Rows> rows_;
};

// A writing transaction from construction; rolled back in the destructor unless committed.
// On a grouped connection it is a savepoint of the group's transaction: its commit keeps its
// writes for the group's one COMMIT, its rollback undoes them alone.
class Transaction {
public:
    explicit Transaction(Database& db, Isolation isolation = Isolation::Serializable);
    ~Transaction();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;
    void commit();

private:
    Database& db_;
    bool nested_ = false;
    bool done_ = false;
};

// What this process has run on its databases since it started: statements (each a round
// trip on PostgreSQL), the reads among them (a SELECT or WITH query), and transactions
// committed (each a sync of SQLite's log with synchronous=FULL; a group commit counts once).
// `tessera-bench dispatch` reports them per work unit, `tessera-bench ingest` per request.
struct DatabaseActivity {
    std::uint64_t statements = 0;
    std::uint64_t reads = 0;
    std::uint64_t commits = 0;
};
DatabaseActivity database_activity();

// Opens a database named by URL: `sqlite:PATH` (or a plain path) or `postgresql://…`
// (`postgres://…`; libpq's connection URI). `create`: a missing SQLite file is created.
// Another scheme (mysql://…) is a DatabaseError that names the two supported.
std::unique_ptr<Database> open_database(std::string_view url, bool create);
// Whether `url` names a PostgreSQL database.
bool is_postgres_url(std::string_view url);

}  // namespace tessera::server
