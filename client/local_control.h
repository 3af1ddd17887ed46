// Local control of a running client (docs/operations.md, "Local control"): `tessera-client
// status|pause|resume|finish|quit` talk to it over a Unix socket in its state directory
// (control.sock, owner-only; no network port). The running client also holds the directory's
// lock, so a second client on the same state directory is refused.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "result.h"
#include "volunteer.h"

namespace tessera::client {

class LocalControl {
public:
    // Takes the state directory's lock (creating the directory, 0700) and serves its socket.
    static common::Result<std::unique_ptr<LocalControl>> open(const std::filesystem::path& state_dir,
                                                              VolunteerControl& control);
    ~LocalControl();
    LocalControl(const LocalControl&) = delete;
    LocalControl& operator=(const LocalControl&) = delete;

    // One request line's answer: {"ok": bool, "message": …} and, for status, the status (and
    // each server's board when there are several).
    std::string answer(const std::string& command);

private:
    boost::json::array servers_json() const;
    LocalControl(VolunteerControl& control, int lock_fd, int listen_fd, std::filesystem::path socket);
    void serve();

    VolunteerControl& control_;
    int lock_fd_;
    int listen_fd_;
    std::filesystem::path socket_;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

// A status answer for a person: for each server, its identity, what the client does for it
// (and whether it is paused or stopping), the unit's progress, the last verdicts and the
// credit of this run; then why a preference holds work, and the preferences in force.
std::string describe_status(const boost::json::object& answer);

// Sends `command` to the client running on `state_dir` and returns its answer line; an error
// when no client is running there.
common::Result<std::string> send_control_command(const std::filesystem::path& state_dir, const std::string& command);

}  // namespace tessera::client
