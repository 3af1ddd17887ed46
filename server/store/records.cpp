// Names of task and assignment states, as stored in the database and shown in the API.
#include "records.h"

#include <array>

namespace tessera::server {
namespace {

constexpr std::array<std::string_view, 3> kTaskStates = {"active", "paused", "finished"};
constexpr std::array<std::string_view, 9> kAssignmentStates = {
    "in_progress", "returned", "validated", "accepted", "confirmed", "rejected", "merged", "timed_out", "abandoned"};

}  // namespace

std::string_view task_state_name(TaskState state) { return kTaskStates[static_cast<std::size_t>(state)]; }

std::optional<TaskState> task_state_from_name(std::string_view name) {
    for (std::size_t i = 0; i < kTaskStates.size(); ++i)
        if (kTaskStates[i] == name) return static_cast<TaskState>(i);
    return std::nullopt;
}

std::string_view assignment_state_name(AssignmentState state) {
    return kAssignmentStates[static_cast<std::size_t>(state)];
}

std::optional<AssignmentState> assignment_state_from_name(std::string_view name) {
    for (std::size_t i = 0; i < kAssignmentStates.size(); ++i)
        if (kAssignmentStates[i] == name) return static_cast<AssignmentState>(i);
    return std::nullopt;
}

std::vector<AssignmentState> all_assignment_states() {
    std::vector<AssignmentState> states;
    for (std::size_t i = 0; i < kAssignmentStates.size(); ++i) states.push_back(static_cast<AssignmentState>(i));
    return states;
}

}  // namespace tessera::server
