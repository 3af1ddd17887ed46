// Slow and broken connections for the soak, written with bare sockets because a well-behaved
// HTTP client cannot misbehave: headers trickled a line every two seconds (the server must
// close the connection at its header timeout), uploads that announce 64 MiB from a client that
// does not exist (answered before the body) and are then reset, and bodies cut off mid-way.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "soak_record.h"

namespace tessera::bench {

// Runs `connections` misbehaving connections at a time against 127.0.0.1:port until `end`,
// counting how each ended in `record` ("slow headers: closed by the server within 40 s", ...).
void run_raw_connections(std::uint16_t port, int connections, std::chrono::steady_clock::time_point end,
                         SoakRecord& record);

}  // namespace tessera::bench
