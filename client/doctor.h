// `tessera-client doctor`: everything a volunteer or a support thread needs on one screen —
// the LibTorch build and the GPUs it sees (with memory, the driver, and whether this user can
// open the device nodes), the state directory (owner, modes, free disk), and the server
// (reachable, TLS, the pinned key, the clock against the server's, the client releases it asks
// for). Each failure says what to do. Nothing is registered or changed.
#pragma once

#include <ostream>
#include <vector>

#include "several_servers.h"
#include "volunteer.h"

namespace tessera::client {

// Prints one line per check; 0 when the client can work, 1 when a check failed. With several
// `servers` (--server a,b), each is checked against its own pinned key (server_state_dir);
// with none or one, `options.server` against the state directory's.
int run_doctor(const VolunteerOptions& options, std::ostream& out, const std::vector<ServerShare>& servers = {});

}  // namespace tessera::client
