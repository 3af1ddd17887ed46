// `tessera-bench soak` (the simulated fleet and misbehaving connections against running
// servers) and `tessera-bench soak-check` (the verdict from the database); scripts/soak
// starts the servers, injects the faults and calls both.
#pragma once

namespace tessera::bench {

int run_soak_command(int argc, char** argv);
int run_soak_check_command(int argc, char** argv);

}  // namespace tessera::bench
