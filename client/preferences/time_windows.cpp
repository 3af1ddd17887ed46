// Parsing and testing time-of-day windows.
#include "time_windows.h"

#include <cstdio>

#include "comma_separated.h"

namespace tessera::client {
namespace {

// "HH:MM" (one or two digits for the hour) as minutes after midnight, or -1.
int minute_of(const std::string& text) {
    auto colon = text.find(':');
    if (colon == std::string::npos || colon == 0 || colon > 2 || text.size() != colon + 3) return -1;
    int hour = 0, minute = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (i == colon) continue;
        if (text[i] < '0' || text[i] > '9') return -1;
        int& field = i < colon ? hour : minute;
        field = field * 10 + (text[i] - '0');
    }
    if (hour > 23 || minute > 59) return -1;
    return hour * 60 + minute;
}

std::string clock_text(int minute) {
    char text[16];
    std::snprintf(text, sizeof text, "%02d:%02d", minute / 60, minute % 60);
    return text;
}

}  // namespace

common::Result<std::vector<TimeWindow>> parse_time_windows(const std::string& text) {
    std::vector<TimeWindow> windows;
    if (trimmed(text).empty()) return windows;
    for (const auto& window : comma_separated(text)) {  // an empty one is refused below
        auto dash = window.find('-');
        if (dash == std::string::npos)
            return common::make_error("\"" + window + "\" is not a window: write it as HH:MM-HH:MM, e.g. 22:00-07:00");
        int start = minute_of(trimmed(window.substr(0, dash)));
        int end = minute_of(trimmed(window.substr(dash + 1)));
        if (start < 0 || end < 0)
            return common::make_error("\"" + window + "\" is not a window: each end is a time of day from 00:00 to 23:59");
        windows.push_back({start, end});
    }
    return windows;
}

bool within_windows(const std::vector<TimeWindow>& windows, int minute_of_day) {
    if (windows.empty()) return true;
    for (const auto& w : windows) {
        if (w.start_minute == w.end_minute) return true;
        bool inside = w.start_minute < w.end_minute
                          ? minute_of_day >= w.start_minute && minute_of_day < w.end_minute
                          : minute_of_day >= w.start_minute || minute_of_day < w.end_minute;  // across midnight
        if (inside) return true;
    }
    return false;
}

std::string describe_windows(const std::vector<TimeWindow>& windows) {
    std::string text;
    for (const auto& w : windows) {
        if (!text.empty()) text += ", ";
        text += clock_text(w.start_minute) + "-" + clock_text(w.end_minute);
    }
    return text;
}

}  // namespace tessera::client
