// The store suites' back ends and records (test_store.cpp, test_store_concurrency.cpp): each
// case runs once on a SQLite file and once on a database in a private PostgreSQL cluster
// (started by the test, on loopback), each on a fresh database.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "postgres_cluster.h"
#include "store.h"
#include "temp_dir.h"

namespace tessera::testing::store_backends {

using namespace tessera::server;

inline PostgresCluster& cluster() {
    static PostgresCluster instance;
    return instance;
}

// A fresh database of one back end, and its URL for reopening.
struct Backend {
    TempDir dir;
    std::string url;
    std::unique_ptr<Store> store;

    explicit Backend(bool postgres) {
        static std::atomic<int> next{0};
        url = postgres ? cluster().create_database("store_" + std::to_string(++next))
                       : "sqlite:" + (dir.path() / "server.db").string();
        store = reopen();
    }
    std::unique_ptr<Store> reopen() {
        auto opened = Store::connect(url, true);
        REQUIRE_MESSAGE(opened.ok(), opened.message());
        return std::move(*opened);
    }
};

// Runs `body` on SQLite, then (as its own subcase) on PostgreSQL.
template <class F>
void on_each_backend(F&& body) {
    SUBCASE("sqlite") {
        Backend backend(false);
        body(backend);
    }
    SUBCASE("postgresql") {
        Backend backend(true);
        body(backend);
    }
}

inline VersionRecord version_record(const std::string& task, std::int64_t version, bool checkpoint = true) {
    VersionRecord v;
    v.task_id = task;
    v.version = version;
    v.blob_sha256 = "blob-" + task + "-" + std::to_string(version);
    v.blob_bytes = 1000 + version;
    v.checkpoint = checkpoint;
    if (!checkpoint) {
        v.patch_sha256 = "patch-" + task + "-" + std::to_string(version);
        v.patch_bytes = 10;
    }
    v.created_at = 100 + version;
    return v;
}

inline void make_task(Store& store, const std::string& id, std::int64_t created_at) {
    TaskRecord task{id, R"({"model":"dit-tiny"})", TaskState::Active, created_at, 0};
    std::vector<ShardRecord> shards = {{"shard-a", 10, 5, 0}, {"shard-b", 20, 6, 0}};
    REQUIRE(store.create_task(task, shards, version_record(id, 0)));
}

inline ClientRecord make_client(Store& store, const std::string& key, std::int64_t now = 1000) {
    auto client = store.register_client(key, "name-" + key, "1.0", "10.0.0.1", now);
    REQUIRE_MESSAGE(client.ok(), client.message());
    REQUIRE(client->has_value());
    return **client;
}

inline AssignmentRecord issue(Store& store, const std::string& unit_id, const std::string& client_id, std::int64_t now,
                              std::int64_t deadline, std::int64_t replicas = 1) {
    WorkUnitRecord unit;
    unit.id = unit_id;
    unit.task_id = "t";
    unit.base_version = 0;
    unit.shards = {"shard-a"};
    unit.local_steps = 50;
    unit.seed = 7;
    unit.replicas = replicas;
    unit.created_at = now;
    AssignmentRecord assignment;
    assignment.id = unit_id + "-a";
    assignment.work_unit_id = unit_id;
    assignment.client_id = client_id;
    assignment.issued_at = now;
    assignment.deadline = deadline;
    assignment.envelope_json = "{}";
    REQUIRE(store.create_work_unit(unit, assignment).value() == Store::Claim::Made);
    return assignment;
}

}  // namespace tessera::testing::store_backends
