// A volunteer attached to several servers (BOINC's projects): one volunteer loop per server,
// each with its own key, pinned server key, blob cache and kept training state, taking turns
// on the machine by the volunteer's shares (TurnTable), one work unit at a time. A server with
// no work, or out of reach, is passed over until it has some again.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "result.h"
#include "volunteer.h"

namespace tessera::client {

struct ServerShare {
    std::string url;
    double share = 1;  // its part of the machine's time, against the others' (any positive scale)
};

// The servers of `--server a,b` with the shares of `--share 3,1` (empty: 1 each), each a
// comma-separated list: the same number of each, shares above 0, no server twice (by host and
// port, as their state directories are named).
common::Result<std::vector<ServerShare>> servers_with_shares(const std::string& urls, const std::string& shares);

// Where one server's state lives among several: <state>/servers/<host>-<port>.
std::filesystem::path server_state_dir(const std::filesystem::path& state, const std::string& url);

// One server: run_volunteer as ever, its state in `base.state_dir` itself. Several: one loop
// each on its own thread under server_state_dir, the blob cache's quota split by share, one
// preference watcher for all, a board each in `control.servers` (made here if the caller has
// not: a caller whose other threads read them makes them first); it returns when every loop
// has ended, with the worst of their Stops (untrusted, then an error, then the rest), its
// message naming the server.
Stop run_volunteers(const VolunteerOptions& base, const std::vector<ServerShare>& servers, VolunteerControl& control);

}  // namespace tessera::client
