// Time-of-day windows a volunteer lets its machine work in, as in `work-hours = 22:00-07:00,
// 12:00-13:30`: local time, minute resolution; a window whose end is before its start crosses
// midnight. No windows: any time.
#pragma once

#include <string>
#include <vector>

#include "result.h"

namespace tessera::client {

struct TimeWindow {
    int start_minute = 0;  // minutes after midnight, 0..1439
    int end_minute = 0;    // exclusive; equal to start: the whole day
};

// "HH:MM-HH:MM[,HH:MM-HH:MM…]"; refuses anything else with what is wrong (`25:00-07:00`,
// `22:00`, `a-b`). An empty text is no windows.
common::Result<std::vector<TimeWindow>> parse_time_windows(const std::string& text);

// Whether `minute_of_day` falls in one of `windows` (always true when there are none).
bool within_windows(const std::vector<TimeWindow>& windows, int minute_of_day);

// "22:00-07:00, 12:00-13:30", as parse_time_windows reads it.
std::string describe_windows(const std::vector<TimeWindow>& windows);

}  // namespace tessera::client
