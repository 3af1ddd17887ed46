// The preferences' rules, one after the other; the first that says wait gives the reason.
#include "work_preferences.h"

#include <cmath>

#include "comma_separated.h"

namespace tessera::client {
namespace {

std::string minutes_text(double minutes) {
    auto rounded = std::round(minutes * 10) / 10;
    auto text = std::to_string(rounded);
    text.erase(text.find_last_not_of('0') + 1);
    if (text.back() == '.') text.pop_back();
    return text + " min";
}

}  // namespace

std::vector<std::string> WorkPreferences::describe() const {
    std::vector<std::string> lines;
    if (idle_minutes > 0) lines.push_back("only after the user has been idle " + minutes_text(idle_minutes));
    if (!run_on_battery) lines.push_back("not on battery");
    if (!work_hours.empty()) lines.push_back("only within " + describe_windows(work_hours));
    if (!exclusive_apps.empty()) {
        std::string names;
        for (const auto& name : exclusive_apps) names += (names.empty() ? "" : ", ") + name;
        lines.push_back("not while " + names + " runs");
    }
    for (auto& line : tasks.describe()) lines.push_back(std::move(line));
    return lines;
}

common::Result<std::vector<std::string>> parse_program_names(const std::string& text) {
    std::vector<std::string> names;
    for (auto& name : comma_separated(text)) {
        if (name.empty()) continue;
        if (name.find('/') != std::string::npos)
            return common::make_error("\"" + name + "\": give a program's name, not its path");
        if (name.size() > 15)
            return common::make_error("\"" + name + "\" is longer than the 15 characters Linux keeps of a "
                                      "program's name: give its first 15 (as `ps -e` shows it)");
        names.push_back(std::move(name));
    }
    return names;
}

std::optional<std::string> reason_to_wait(const WorkPreferences& preferences, const MachineState& machine) {
    if (!within_windows(preferences.work_hours, machine.minute_of_day))
        return "outside the work hours (" + describe_windows(preferences.work_hours) + ")";
    if (!preferences.run_on_battery && machine.on_battery) return "on battery";
    for (const auto& name : preferences.exclusive_apps)
        if (machine.programs.count(name) > 0) return name + " is running";
    if (preferences.idle_minutes > 0 && machine.user_idle_s && *machine.user_idle_s < preferences.idle_minutes * 60)
        return "the user is active (idle less than " + minutes_text(preferences.idle_minutes) + ")";  // one text:
                                                                                                  // logged once
    return std::nullopt;
}

}  // namespace tessera::client
