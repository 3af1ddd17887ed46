// `tessera-bench replicas`: how far apart honest replicas of one work unit are, which is what
// the replica tolerance must allow (docs/operations.md, "Replication"; figures in
// docs/benchmarks.md). For each of N units, trained from a partly trained model on one shard
// of a dataset: the same unit again with another thread count (what differs between two
// conforming volunteers on CPUs: the order of floating-point sums), and with other random
// streams (a volunteer that does not follow the randomness specification, or another unit).
#pragma once

#include "result.h"

namespace tessera::bench {

// Parses its own options (argv[0] is "replicas"); prints the report; returns the exit status.
int run_replica_command(int argc, char** argv);

}  // namespace tessera::bench
