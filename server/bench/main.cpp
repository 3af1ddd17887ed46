// tessera-bench: Tessera's benchmarks. `train` measures the trainer's samples/s against
// PyTorch Python running the same model and loop; `fleet` simulates a volunteer fleet
// training through the server's components on a virtual clock (docs/fleet_simulator.md);
// `dispatch` and `ingest` measure one server's front end and result pipeline; `replicas` how
// far apart honest replicas of a unit are; `soak` loads running servers for hours and
// `soak-check` checks what they did with it.
#include <iostream>

#include "allocator_tuning.h"
#include "dispatch_bench.h"
#include "fleet/fleet_command.h"
#include "ingest_bench.h"
#include "replica_bench.h"
#include "soak/soak_command.h"
#include "train_bench.h"

int main(int argc, char** argv) {
    tessera::common::tune_allocator_for_training();
    std::string command = argc >= 2 ? argv[1] : "";
    if (command == "fleet") return tessera::bench::run_fleet_command(argc - 1, argv + 1);
    if (command == "dispatch") return tessera::bench::run_dispatch_command(argc - 1, argv + 1);
    if (command == "ingest") return tessera::bench::run_ingest_command(argc - 1, argv + 1);
    if (command == "replicas") return tessera::bench::run_replica_command(argc - 1, argv + 1);
    if (command == "soak") return tessera::bench::run_soak_command(argc - 1, argv + 1);
    if (command == "soak-check") return tessera::bench::run_soak_check_command(argc - 1, argv + 1);
    if (command == "train") return tessera::bench::run_train_command(argc - 1, argv + 1);
    std::cerr << "usage: tessera-bench train --model PRESET --device cpu|cuda [options]\n"
                 "       tessera-bench fleet --data DIR [--fleet home] [--volunteers K] [options]\n"
                 "       tessera-bench dispatch --data DIR [--volunteers N] [--connections C] [options]\n"
                 "       tessera-bench ingest --data DIR [--model dit-s] [--results R] [options]\n"
                 "       tessera-bench replicas --data DIR [--model cnn] [--units N] [options]\n"
                 "       tessera-bench soak --server URL --out DIR [--volunteers N] [--minutes M] [options]\n"
                 "       tessera-bench soak-check --db URL --acks FILE\n"
                 "Run `tessera-bench COMMAND --help` for the options.\n";
    return 2;
}
