// `tessera-bench fleet [options]`: the fleet simulator's command line.
#pragma once

namespace tessera::bench {

// argv[0] is "fleet"; returns the process exit code.
int run_fleet_command(int argc, char** argv);

}  // namespace tessera::bench
