// What every part of the store shares (store.h): its connections — one writer on SQLite, with
// group commit and read-only readers on WAL snapshots; a small pool on PostgreSQL — and how a
// call runs on one of them (store_internal.h). Each part is a virtual base of Store, so all of
// them share this one.
#pragma once

#include <cstddef>
#include <memory>
#include <utility>

#include "connection_pool.h"

namespace tessera::server {

class Database;
class GroupCommit;

class StoreCore {
public:
    StoreCore(const StoreCore&) = delete;
    StoreCore& operator=(const StoreCore&) = delete;

protected:
    StoreCore();
    ~StoreCore();

    // Runs `body` on a free connection of `pool` (store_internal.h): `guarded` on a writer
    // (on SQLite in the next group commit), `reading` (a call that only reads) on a reader.
    template <class F>
    auto guarded_on(ConnectionPool& pool, F&& body) -> decltype(body());
    template <class F>
    auto guarded(F&& body) -> decltype(body());
    template <class F>
    auto reading(F&& body) -> decltype(body()) {
        return guarded_on(readers_.empty() ? writers_ : readers_, std::forward<F>(body));
    }
    // The connection of the call running on this thread.
    static Database& db();

    // Writers: one connection for SQLite (its writes are serialised); kPostgresConnections for
    // PostgreSQL, whose transactions run in parallel, each call on a free one. Readers (SQLite
    // only; PostgreSQL reads on its writers): kSqliteReaders connections that only read, each
    // on its own snapshot of the WAL, so reads neither wait for the writer nor hold it.
    static constexpr std::size_t kPostgresConnections = 8;
    static constexpr std::size_t kSqliteReaders = 4;
    ConnectionPool writers_;
    ConnectionPool readers_;
    std::unique_ptr<GroupCommit> group_;  // SQLite's writes
};

}  // namespace tessera::server
