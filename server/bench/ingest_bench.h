// `tessera-bench ingest`: how fast one server takes results in. Made-up dit-s (or any
// preset) int8 deltas go through the server's own intake, validator, merge policy and
// commits (server/bench/fleet/in_process_server.h, no HTTP: `dispatch` measures that) and
// come out as results/s; then the merge loop alone (the policy's θ += w·Δ over the model)
// as bytes/s next to the machine's memory bandwidth, measured in the same run with a
// one-thread STREAM triad over arrays of the model's size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <ostream>
#include <string>

#include "result.h"

namespace tessera::bench {

struct IngestBenchOptions {
    std::filesystem::path data;  // a prepared dataset (tessera-data prepare)
    std::string model = "dit-s";
    std::int64_t results = 24;
    std::string policy = "fedasync";
    std::int64_t buffer = 0;             // fedbuff/diloco K; 0: the policy's default
    double loss_check = 0;               // fraction of results given the held-out loss check
    std::string patches = "int2";        // downlink patch codec, or "off"
    std::int64_t checkpoint_every = 20;  // with patches: a full checkpoint every this many versions
    std::int64_t keep_checkpoints = 3;   // retention; 0 keeps every version's files
    std::string database_url;            // --db: an empty PostgreSQL database; empty: SQLite
};

struct IngestFigures {
    std::int64_t parameters = 0;
    std::size_t result_bytes = 0;
    double pipeline_s = 0;
    double results_per_s = 0;
    std::int64_t merged = 0;    // by the end
    std::int64_t rejected = 0;  // by validation
    std::int64_t refused = 0;   // at intake
    std::int64_t version = 0;
    // The database per request, averaged: a work request's statements and reads (SELECT),
    // and an uploaded result's from intake through validation to its merge and commit.
    double work_statements = 0;
    double work_reads = 0;
    double result_statements = 0;
    double result_reads = 0;
    double decodes_per_result = 0;  // delta files decoded per result, its checks and its merge
    double merges_per_s = 0;        // results merged per second of the aggregator's time
    std::uint64_t state_bytes = 0;  // blobs and result files at the end (shards and version 0 included)
    double merge_s = 0;             // one add, the best of five
    double merge_bytes_per_s = 0;   // 12 bytes per parameter
    double memory_bytes_per_s = 0;  // the triad
};

// Runs the benchmark and prints its figures on `out`.
common::Result<IngestFigures> run_ingest_bench(const IngestBenchOptions& options, std::ostream& out);

// `tessera-bench ingest [options]` (argv[0] is "ingest"): parses, runs, prints; the exit code.
int run_ingest_command(int argc, char** argv);

}  // namespace tessera::bench
