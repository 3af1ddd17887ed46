// Which of a server's tasks the volunteer takes (BOINC's per-project application choice): only
// those named, never those excluded, each named by its task id or its model preset. The
// server applies it when it chooses a task for the volunteer's work request.
#pragma once

#include <string>
#include <vector>

#include "result.h"

namespace tessera::client {

struct TaskChoice {
    std::vector<std::string> only;     // task ids or model presets; empty: any task
    std::vector<std::string> exclude;  // never these

    // For `tessera-client status`: "only the tasks a, b", "never the tasks c"; nothing when any.
    std::vector<std::string> describe() const;
};

// "fashion-mnist-dit-tiny, cnn" as names; refuses a name a server cannot have (1 to 64 of
// A-Z a-z 0-9 _ -) and more than 64 names.
common::Result<std::vector<std::string>> parse_task_names(const std::string& text);

}  // namespace tessera::client
