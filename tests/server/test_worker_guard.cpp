// The worker threads' exception boundary: a job that throws is logged and counted, the pool's
// bookkeeping is released and the thread goes on; a group-commit call that throws fails alone.
#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <new>
#include <sstream>
#include <stdexcept>
#include <string>

#include "connection_pool.h"
#include "database.h"
#include "group_commit.h"
#include "server_metrics.h"
#include "store_internal.h"
#include "temp_dir.h"
#include "work_pool.h"
#include "worker_guard.h"

using namespace tessera::server;
using tessera::common::run_guarded;
using tessera::common::worker_failures;
using tessera::testing::TempDir;

namespace {

std::uint64_t failures_of(const std::string& worker) {
    auto all = worker_failures();
    auto found = all.find(worker);
    return found == all.end() ? 0 : found->second;
}

}  // namespace

TEST_CASE("run_guarded: a job that returns is not counted; one that throws anything is, by worker") {
    auto before = failures_of("test worker");
    CHECK(run_guarded("test worker", [] {}));
    CHECK(failures_of("test worker") == before);
    CHECK_FALSE(run_guarded("test worker", [] { throw std::runtime_error("boom"); }));
    CHECK_FALSE(run_guarded("test worker", [] { throw 42; }));
    CHECK(failures_of("test worker") == before + 2);
}

TEST_CASE("work pool: a job that throws releases its count; the pool's threads run the jobs after it") {
    for (std::size_t threads : {std::size_t{0}, std::size_t{2}}) {
        CAPTURE(threads);
        WorkPool pool(threads);
        auto run = pool.executor();
        auto before = failures_of("work pool");
        std::atomic<int> ran{0};
        run([] { throw std::bad_alloc(); });
        run([] { throw std::runtime_error("a validation's bug"); });
        pool.wait_idle();  // would wait for ever were the throwing jobs still counted
        for (int i = 0; i < 4; ++i) run([&] { ++ran; });
        pool.wait_idle();
        CHECK(ran == 4);
        CHECK(failures_of("work pool") == before + 2);

        std::ostringstream metrics;
        ServerMetrics().write(metrics);
        CHECK(metrics.str().find("tessera_worker_failures_total{worker=\"work pool\"} " + std::to_string(before + 2) +
                                 "\n") != std::string::npos);
    }
}

TEST_CASE("group commit: a call that throws fails alone and undoes its writes; the others commit and it leads again") {
    TempDir dir;
    ConnectionPool writers;
    writers.add(open_database("sqlite:" + (dir.path() / "group.db").string(), true));
    {
        auto* db = writers.acquire();
        db->exec("PRAGMA journal_mode=WAL; CREATE TABLE t(x INTEGER);");
        writers.release(db);
    }
    GroupCommit group(writers);
    auto insert = [](int x) { Statement(*current_connection, "INSERT INTO t VALUES (?)").bind(1, x).run(); };
    auto before = failures_of("group commit");

    CHECK(group
              .run([&] {
                  insert(1);
                  return true;
              })
              .empty());
    auto failure = group.run([&]() -> bool {
        insert(2);
        throw std::runtime_error("a bug in a store call");
    });
    CHECK(failure.find("threw") != std::string::npos);
    CHECK(failures_of("group commit") == before + 1);
    CHECK(group
              .run([&] {  // the writer and the leader's place were released
                  insert(3);
                  return true;
              })
              .empty());

    auto check = open_database("sqlite:" + (dir.path() / "group.db").string(), false);
    Statement rows(*check, "SELECT group_concat(x) FROM (SELECT x FROM t ORDER BY x)");
    rows.step();
    CHECK(rows.text(0) == "1,3");
}
