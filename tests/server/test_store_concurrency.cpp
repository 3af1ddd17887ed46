// The store under concurrency, on both back ends (store_backends.h): prepared statements
// reused, group commit, validation claims and the transitioner's claims across processes.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "connection_pool.h"
#include "database.h"
#include "group_commit.h"
#include "store_backends.h"
#include "store_internal.h"

using namespace tessera::server;
using namespace tessera::testing::store_backends;
using tessera::testing::TempDir;

TEST_CASE("SQLite statements are prepared once and reused: bindings cleared, open copies apart, reads ended") {
    TempDir dir;
    auto db = open_database("sqlite:" + (dir.path() / "statements.db").string(), true);
    db->exec("CREATE TABLE t(x INTEGER); INSERT INTO t VALUES (1), (2), (3);");
    constexpr const char* kAll = "SELECT x FROM t ORDER BY x";

    // The same text open twice at once: two statements, each reading all its rows.
    std::optional<Statement> outer(std::in_place, *db, kAll);
    REQUIRE(outer->step());
    CHECK(outer->integer(0) == 1);
    {
        Statement inner(*db, kAll);
        std::int64_t sum = 0;
        while (inner.step()) sum += inner.integer(0);
        CHECK(sum == 6);
    }
    REQUIRE(outer->step());
    CHECK(outer->integer(0) == 2);

    // A reused statement starts with no values bound: an unbound parameter reads NULL.
    for (int i = 0; i < 100; ++i) {
        Statement both(*db, "SELECT ?, ?");
        both.bind(1, i).bind(2, i + 1);
        REQUIRE(both.step());
        CHECK(both.integer(1) == i + 1);
    }
    Statement first_only(*db, "SELECT ?, ?");
    first_only.bind(1, 7);
    REQUIRE(first_only.step());
    CHECK(first_only.integer(0) == 7);
    CHECK(first_only.is_null(1));

    // A statement left mid-read is ended when its rows are dropped: the table can be dropped
    // (SQLite refuses while any statement still reads it).
    outer.reset();
    {
        Statement partial(*db, kAll);
        REQUIRE(partial.step());
    }
    db->exec("DROP TABLE t");
    CHECK_THROWS_AS(Statement(*db, kAll).run(), DatabaseError);
}

namespace {

std::int64_t rows_of(Database& db, const std::string& table) {
    Statement count(db, "SELECT COUNT(*) FROM " + table);
    count.step();
    return count.integer(0);
}

}  // namespace

TEST_CASE("group commit: calls that wait for a batch commit together; a failed call undoes its own writes alone") {
    TempDir dir;
    ConnectionPool writers;
    writers.add(open_database("sqlite:" + (dir.path() / "group.db").string(), true));
    std::unique_ptr<Database> check;  // a reader's connection, as the store's readers are
    {
        auto* db = writers.acquire();
        db->exec(
            "PRAGMA journal_mode=WAL; CREATE TABLE parent(id INTEGER PRIMARY KEY); CREATE TABLE t(x INTEGER); "
            "CREATE TABLE child(parent INTEGER REFERENCES parent(id) DEFERRABLE INITIALLY DEFERRED); "
            "PRAGMA foreign_keys=ON;");
        writers.release(db);
    }
    check = open_database("sqlite:" + (dir.path() / "group.db").string(), false);
    GroupCommit group(writers);
    auto insert = [](int x, bool keep) {
        return [x, keep] {
            Transaction transaction(*current_connection);
            Statement(*current_connection, "INSERT INTO t VALUES (?)").bind(1, x).run();
            if (keep) transaction.commit();
            return keep;
        };
    };

    // The first call holds its batch open until four more calls wait; those four then make one
    // batch: one COMMIT for them, and the one whose body failed left no row.
    std::promise<void> first_started;
    std::promise<void> release_first;
    auto first_done = std::async(std::launch::async, [&] {
        return group.run([&] {
            first_started.set_value();
            release_first.get_future().wait();
            return insert(0, true)();
        });
    });
    first_started.get_future().wait();
    std::vector<std::future<std::string>> calls;
    for (int x = 1; x <= 4; ++x)
        calls.push_back(std::async(std::launch::async, [&, x] { return group.run(insert(x, x != 3)); }));
    while (group.waiting() != 4) std::this_thread::yield();
    auto commits_before = database_activity().commits;
    release_first.set_value();
    CHECK(first_done.get().empty());
    for (auto& call : calls) CHECK(call.get().empty());
    CHECK(database_activity().commits - commits_before == 2);  // the first batch's and the four's
    CHECK(rows_of(*check, "t") == 4);
    {
        Statement absent(*check, "SELECT COUNT(*) FROM t WHERE x = 3");
        absent.step();
        CHECK(absent.integer(0) == 0);
    }

    // A batch whose COMMIT fails (a deferred foreign key left unmet) fails every call in it,
    // and none of their writes remain.
    std::promise<void> second_started;
    std::promise<void> release_second;
    auto holder = std::async(std::launch::async, [&] {
        return group.run([&] {
            second_started.set_value();
            release_second.get_future().wait();
            return true;
        });
    });
    second_started.get_future().wait();
    auto good = std::async(std::launch::async, [&] { return group.run(insert(5, true)); });
    auto orphan = std::async(std::launch::async, [&] {
        return group.run([] {
            Statement(*current_connection, "INSERT INTO child VALUES (42)").run();
            return true;
        });
    });
    while (group.waiting() != 2) std::this_thread::yield();
    release_second.set_value();
    auto held = holder.get();
    CHECK_MESSAGE(held.empty(), held);
    auto good_failure = good.get();
    CHECK(good_failure.find("FOREIGN KEY") != std::string::npos);
    CHECK(orphan.get() == good_failure);
    CHECK(rows_of(*check, "t") == 4);
    CHECK(rows_of(*check, "child") == 0);

    // The writer is usable again: the next batch commits.
    CHECK(group.run(insert(6, true)).empty());
    CHECK(rows_of(*check, "t") == 5);
}

TEST_CASE("validation claims: a result has one holder until its claim lapses; gone holders' results are released") {
    on_each_backend([](Backend& b) {
        auto& store = *b.store;
        make_task(store, "t", 50);
        auto alice = make_client(store, "key-a");
        std::vector<std::string> ids;
        for (int i = 0; i < 4; ++i) ids.push_back(issue(store, "w" + std::to_string(i), alice.id, 1000, 2000).id);
        REQUIRE(store.record_return(ids[0], "d", 8, "{}", 1100, {"A", 1160}).value());
        REQUIRE(store.record_return(ids[1], "d", 8, "{}", 1101).value());  // nobody's
        REQUIRE(store.record_return(ids[2], "d", 8, "{}", 1102, {"gone", 1162}).value());
        using Ids = std::vector<std::string>;

        CHECK(store.claim_returned({"B", 1200}, 1110, 10).value() == Ids{ids[1]});
        CHECK(store.claim_returned({"C", 1200}, 1110, 10).value().empty());  // every result has a holder
        CHECK(store.claim_returned({"B", 1200}, 1110, 10, {"gone"}).value() == Ids{ids[2]});
        CHECK(store.result_claim_holders().value() == Ids{"A", "B"});
        CHECK(store.claim_returned({"C", 1300}, 1160, 10).value() == Ids{ids[0]});  // A's claim lapsed
        CHECK(store.claim_returned({"D", 1400}, 1200, 1).value() == Ids{ids[1]});   // B's too: the oldest first

        REQUIRE(store.accept(store.assignment(ids[0]).value().value(), {1, 0.01, 0.4, 12}, 1, true, 1201)
                    .value());  // no longer returned
        CHECK(store.release_result_claims("C").value() == 0);
        CHECK(store.release_result_claims("B").value() == 1);
        CHECK(store.claim_returned({"E", 1500}, 1201, 10).value() == Ids{ids[2]});
        CHECK(store.result_claim_holders().value() == Ids{"D", "E"});
        CHECK(store.claim_returned({"F", 1500}, 1201, 10).value().empty());
    });
}

TEST_CASE("validation claims: two processes claiming together never take the same result") {
    on_each_backend([](Backend& b) {
        make_task(*b.store, "t", 50);
        auto alice = make_client(*b.store, "key-a");
        constexpr int kResults = 40;
        for (int i = 0; i < kResults; ++i) {
            auto a = issue(*b.store, "w" + std::to_string(i), alice.id, 1000, 2000);
            REQUIRE(b.store->record_return(a.id, "d", 8, "{}", 1100 + i).value());
        }
        auto other = b.reopen();
        auto claim_all = [](Store& store, const std::string& holder) {
            std::vector<std::string> mine;
            for (;;) {
                auto claimed = store.claim_returned({holder, 5000}, 1200, 3);
                REQUIRE_MESSAGE(claimed.ok(), claimed.message());
                if (claimed->empty()) return mine;
                mine.insert(mine.end(), claimed->begin(), claimed->end());
            }
        };
        auto first = std::async(std::launch::async, [&] { return claim_all(*b.store, "P1"); });
        auto second = claim_all(*other, "P2");
        auto all = first.get();
        all.insert(all.end(), second.begin(), second.end());
        std::sort(all.begin(), all.end());
        CHECK(all.size() == kResults);
        CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // none twice
    });
}

TEST_CASE("the transitioner's claims: two processes time out each overdue assignment once") {
    on_each_backend([](Backend& b) {
        make_task(*b.store, "t", 50);
        auto alice = make_client(*b.store, "key-a");
        constexpr int kUnits = 40;
        for (int i = 0; i < kUnits; ++i) issue(*b.store, "w" + std::to_string(i), alice.id, 1000, 2000);
        auto other = b.reopen();
        auto expire = [](Store& store) {
            auto ended = store.expire_overdue("t", 3000, 100);
            REQUIRE_MESSAGE(ended.ok(), ended.message());  // no conflict with the other process
            std::vector<std::string> units;
            for (const auto& e : *ended) units.push_back(e.work_unit_id);
            return units;
        };
        auto first = std::async(std::launch::async, [&] { return expire(*b.store); });
        auto all = expire(*other);
        auto theirs = first.get();
        all.insert(all.end(), theirs.begin(), theirs.end());
        std::sort(all.begin(), all.end());
        CHECK(all.size() == kUnits);
        CHECK(std::adjacent_find(all.begin(), all.end()) == all.end());  // none twice
        for (int i = 0; i < kUnits; ++i)
            CHECK(b.store->work_unit("w" + std::to_string(i)).value()->failures == 1);  // one failure each
    });
}
