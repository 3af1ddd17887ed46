// `tessera-bench dispatch`: how many work units per second one server (or several on one
// PostgreSQL database) hands out and takes back. Real tessera-servers (in this process, on
// loopback ports, over a fresh state with the task made from `data`) and N simulated volunteers with their own keys; C threads, each
// with its share of the volunteers, ask for work and upload a tiny made-up result (top-k)
// for every unit, signed, with a new connection per request as the real client does
// (client/core). Prints WU/s and the p50/p99 latency of each request kind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "result.h"

namespace tessera::bench {

struct DispatchBenchOptions {
    std::filesystem::path data;      // a prepared dataset (tessera-data prepare)
    std::int64_t volunteers = 1000;  // registered before the measurement
    int connections = 16;            // volunteers active at once (client threads)
    double seconds = 20;             // measured
    double topk_fraction = 0.001;    // of each tensor: the "tiny" results
    std::string model = "dit-tiny";
    std::size_t handler_threads = 4;     // the server's --handler-threads
    std::size_t validation_threads = 8;  // the server's --validation-threads and its default
    std::size_t work_threads = 2;        // the server's --work-threads and its default (loss checks)
    std::string database_url;         // --db: an empty PostgreSQL database; empty: SQLite
    // Server instances on the database (more than one: PostgreSQL), each with its own
    // connections and threads, in this process; the volunteers are spread over them evenly,
    // as an nginx upstream would.
    int servers = 1;
    // The volunteers' HttpOptions::keep_alive, in seconds (0: a connection per request).
    int keep_alive_s = 5;
};

struct DispatchFigures {
    double seconds = 0;
    std::int64_t units = 0;     // asked for and returned
    std::int64_t no_work = 0;   // work requests answered "no work"
    std::int64_t failures = 0;  // requests that failed
    std::string first_failure;
    double units_per_s = 0;
    double work_p50_ms = 0, work_p99_ms = 0;
    double upload_p50_ms = 0, upload_p99_ms = 0;
    double unit_p50_ms = 0, unit_p99_ms = 0;
    double register_s = 0;
    std::size_t result_bytes = 0;
    // Database statements (the reads among them) and commits in the process while measuring,
    // per unit returned.
    double statements_per_unit = 0;
    double reads_per_unit = 0;
    double commits_per_unit = 0;
};

// Runs the benchmark and prints its figures on `out`.
common::Result<DispatchFigures> run_dispatch_bench(const DispatchBenchOptions& options, std::ostream& out);

// `tessera-bench dispatch [options]` (argv[0] is "dispatch"): parses, runs, prints; the exit code.
int run_dispatch_command(int argc, char** argv);

}  // namespace tessera::bench
