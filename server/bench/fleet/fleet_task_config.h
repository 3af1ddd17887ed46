// The task configuration of a simulated run (`tessera-bench fleet`): the dataset's defaults as
// `task create` makes them, the command line's overrides, and what each run's policy fixes.
#pragma once

#include <string>

#include "fleet_command_line.h"
#include "result.h"
#include "task_config.h"

namespace tessera::bench {

// The task every run shares, from the dataset and the flags.
common::Result<server::TaskConfig> base_config(const CommandOptions& o, server::PolicyKind policy);

// The task of run `run` (central, ddp, sync-fedavg, sync-diloco or an async policy) on a fleet of
// `k`: its policy, and what a synchronous baseline fixes (equal units, no replication, all K
// results merged at once); `synchronous` says which it was.
common::Result<server::TaskConfig> config_for(const CommandOptions& o, const std::string& run, std::int64_t k,
                                              bool& synchronous);

}  // namespace tessera::bench
