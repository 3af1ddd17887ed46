// Smoke runs of `tessera-bench dispatch` and `ingest` on a synthetic dataset, on SQLite and on
// a private PostgreSQL cluster (scripts/bench_postgres): every unit asked for comes back,
// nothing fails, the figures are consistent, and every result is merged.
#include <doctest/doctest.h>

#include <sstream>

#include "dispatch_bench.h"
#include "ingest_bench.h"
#include "postgres_cluster.h"
#include "synthetic_dataset.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// The server's database for one subcase: "" (SQLite), or a fresh PostgreSQL database.
std::string database_for(const std::string& backend, const std::string& name) {
    if (backend == "sqlite") return "";
    static testing::PostgresCluster cluster;
    return cluster.create_database(name);
}

}  // namespace

TEST_CASE("dispatch: simulated volunteers ask for work and return results over loopback HTTP") {
    testing::TempDir dir;
    testing::write_synthetic_dataset(dir / "data", 2);
    DispatchBenchOptions options;
    options.data = dir / "data";
    options.volunteers = 20;
    options.connections = 2;
    options.seconds = 1;
    options.topk_fraction = 0.01;
    SUBCASE("sqlite") { options.database_url = database_for("sqlite", ""); }
    SUBCASE("postgresql") { options.database_url = database_for("postgresql", "dispatch"); }
    std::ostringstream out;
    auto figures = run_dispatch_bench(options, out).value();
    INFO(out.str());
    CHECK(figures.failures == 0);
    CHECK(figures.units > 0);
    CHECK(figures.units_per_s > 0);
    CHECK(figures.work_p50_ms <= figures.work_p99_ms);
    CHECK(figures.unit_p50_ms >= figures.work_p50_ms);
    CHECK(out.str().find("WU/s") != std::string::npos);
    // A unit takes at least its claim and its result's row: two commits.
    CHECK(figures.commits_per_unit >= 2);
    CHECK(figures.statements_per_unit > figures.commits_per_unit);
}

TEST_CASE("ingest: made-up results are validated and merged, and the merge loop is measured") {
    testing::TempDir dir;
    testing::write_synthetic_dataset(dir / "data", 2);
    IngestBenchOptions options;
    options.data = dir / "data";
    options.model = "dit-tiny";
    options.results = 3;
    SUBCASE("sqlite") { options.database_url = database_for("sqlite", ""); }
    SUBCASE("postgresql") { options.database_url = database_for("postgresql", "ingest"); }
    std::ostringstream out;
    auto figures = run_ingest_bench(options, out).value();
    INFO(out.str());
    CHECK(figures.merged == 3);
    CHECK(figures.rejected == 0);
    CHECK(figures.refused == 0);
    CHECK(figures.version == 3);  // fedasync: one version per result
    CHECK(figures.parameters > 0);
    CHECK(figures.merge_bytes_per_s > 0);
    CHECK(figures.memory_bytes_per_s > 0);
    // Every request reads the database, and a read is one of the statements counted.
    CHECK(figures.work_reads > 0);
    CHECK(figures.work_reads <= figures.work_statements);
    CHECK(figures.result_reads > 0);
    CHECK(figures.result_reads <= figures.result_statements);
    // The checks decode each delta; the merge takes the decoded form (issue 53, item 3).
    CHECK(figures.decodes_per_result == doctest::Approx(1.0));
    CHECK(out.str().find("results/s") != std::string::npos);
}
