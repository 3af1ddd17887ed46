// Reading the machine: files under /sys, /proc and /dev, and logind over the system bus.
#include "machine_sensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <fstream>

namespace tessera::client {
namespace {

std::string first_line(const std::filesystem::path& file) {
    std::ifstream in(file);
    std::string line;
    std::getline(in, line);
    return line;
}

bool all_digits(const std::string& text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); });
}

int local_minute_of_day() {
    auto now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    return local.tm_hour * 60 + local.tm_min;
}

double seconds_since(const timespec& when) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    double seconds = static_cast<double>(now.tv_sec - when.tv_sec) + (now.tv_nsec - when.tv_nsec) / 1e9;
    return std::max(seconds, 0.0);
}

}  // namespace

MachineState SystemSensors::read(const WorkPreferences& preferences) {
    MachineState machine;
    machine.minute_of_day = local_minute_of_day();
    if (!preferences.run_on_battery) machine.on_battery = on_battery();
    if (!preferences.exclusive_apps.empty()) machine.programs = running_programs();
    if (preferences.idle_minutes > 0) machine.user_idle_s = user_idle_seconds();
    return machine;
}

std::optional<double> SystemSensors::user_idle_seconds() const {
    auto terminals = terminal_idle_seconds();
    auto logind = root_ == "/" ? logind_idle_seconds() : std::nullopt;
    if (terminals && logind) return std::min(*terminals, *logind);
    return terminals ? terminals : logind;
}

// A terminal's access time moves when someone types on it (what `w` shows as IDLE).
std::optional<double> SystemSensors::terminal_idle_seconds() const {
    std::optional<double> idle;
    auto consider = [&](const std::filesystem::path& device) {
        struct stat info{};
        if (stat(device.c_str(), &info) != 0 || S_ISDIR(info.st_mode)) return;
        auto seconds = seconds_since(info.st_atim);
        if (!idle || seconds < *idle) idle = seconds;
    };
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(root_ / "dev/pts", error))
        if (all_digits(entry.path().filename().string())) consider(entry.path());
    for (const auto& entry : std::filesystem::directory_iterator(root_ / "dev", error)) {
        auto name = entry.path().filename().string();
        if (name.size() > 3 && name.starts_with("tty") && all_digits(name.substr(3))) consider(entry.path());
    }
    return idle;
}

bool SystemSensors::on_battery() const {
    std::error_code error;
    for (const auto& supply : std::filesystem::directory_iterator(root_ / "sys/class/power_supply", error))
        if (first_line(supply.path() / "type") == "Battery" && first_line(supply.path() / "status") == "Discharging")
            return true;
    return false;
}

std::set<std::string> SystemSensors::running_programs() const {
    std::set<std::string> names;
    std::error_code error;
    for (const auto& process : std::filesystem::directory_iterator(root_ / "proc", error)) {
        if (!all_digits(process.path().filename().string())) continue;
        auto name = first_line(process.path() / "comm");  // gone already: empty
        if (!name.empty()) names.insert(name);
    }
    return names;
}

}  // namespace tessera::client
