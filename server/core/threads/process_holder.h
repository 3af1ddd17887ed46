// The name a server process goes by in the database (leases, validation claims): host:pid:random,
// unique among the processes sharing one database, and whether such a process is known to be
// gone (one of this host whose pid no longer runs).
#pragma once

#include <string>

namespace tessera::server {

std::string process_holder_name();
// True only for a holder of this host whose process has exited; a process of another host, or
// a name not in the host:pid:random form, is never known to be gone.
bool holder_gone(const std::string& holder);

}  // namespace tessera::server
