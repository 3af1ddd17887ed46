// When a volunteer's owner lets it work (BOINC's computing preferences): only after the user
// has been idle a while, not on battery, only within time windows, never while a named program
// runs; and on which of a server's tasks (task_choice.h). One decision point: reason_to_wait()
// reads the machine's state, as sensed, and answers why the client must not work now, or
// nothing when it may.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "result.h"
#include "task_choice.h"
#include "time_windows.h"

namespace tessera::client {

struct WorkPreferences {
    double idle_minutes = 0;               // 0: work whether or not the user is active
    bool run_on_battery = false;           // false: wait while the machine runs on battery
    std::vector<TimeWindow> work_hours;    // empty: any time of day
    std::vector<std::string> exclusive_apps;  // program names (as in `ps -e`) that pause work
    TaskChoice tasks;                         // which of a server's tasks to take

    // What is in force, for `tessera-client status` ("idle 10 min", "not on battery", …).
    std::vector<std::string> describe() const;
};

// "steam, blender" as a list of program names; refuses names with a '/' or over 15 characters
// (the kernel keeps the first 15 characters of a program's name).
common::Result<std::vector<std::string>> parse_program_names(const std::string& text);

// The machine as the sensors saw it at one moment.
struct MachineState {
    std::optional<double> user_idle_s;  // nothing: no way to tell (taken as idle, and said so)
    bool on_battery = false;
    std::set<std::string> programs;     // names of the running programs
    int minute_of_day = 0;              // local time
};

// Why the client must wait now (e.g. "on battery", "steam is running"), or nothing.
std::optional<std::string> reason_to_wait(const WorkPreferences& preferences, const MachineState& machine);

}  // namespace tessera::client
