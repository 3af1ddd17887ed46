// Where the machine's state comes from. SystemSensors reads Linux: the user's idle time from
// logind (when built with libsystemd and a system bus answers) and from the terminals' last
// input (/dev/pts/*, /dev/tty*), the battery from /sys/class/power_supply, the programs from
// /proc, the local time. Tests give their own sensors, or a SystemSensors over a fake root.
#pragma once

#include <filesystem>

#include "work_preferences.h"

namespace tessera::client {

class MachineSensors {
public:
    virtual ~MachineSensors() = default;
    // Reads what `preferences` need (the process list only when there are exclusive apps).
    virtual MachineState read(const WorkPreferences& preferences) = 0;
};

class SystemSensors : public MachineSensors {
public:
    // `root` stands for / (tests point it at a folder laid out as proc/, sys/, dev/).
    explicit SystemSensors(std::filesystem::path root = "/") : root_(std::move(root)) {}
    MachineState read(const WorkPreferences& preferences) override;

    std::optional<double> user_idle_seconds() const;  // nothing: no source could tell
    bool on_battery() const;                          // a battery discharging
    std::set<std::string> running_programs() const;

private:
    std::optional<double> terminal_idle_seconds() const;
    std::filesystem::path root_;
};

// Seconds since logind last saw the user active (0 while active), or nothing without
// libsystemd or a system bus.
std::optional<double> logind_idle_seconds();

}  // namespace tessera::client
