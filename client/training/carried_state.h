// What a volunteer carries from one unit of a task to the next, in its state directory: the
// error-feedback residual (error_feedback.h) and the kept optimizer state
// (optimizer_state.h). Loaded when the client starts, saved after each unit's delta is safe
// on disk (a crash in between reuses one unit's older state once: harmless).
#pragma once

#include <string>
#include <vector>

#include "client_state.h"
#include "error_feedback.h"
#include "optimizer_state.h"

namespace tessera::client {

struct CarriedState {
    ErrorFeedback feedback;
    KeptOptimizerState optimizer;
};

// Both files; one that cannot be read is started afresh, and why is added to `problems`.
CarriedState load_carried_state(const ClientState& state, std::vector<std::string>& problems);
// Both files; returns what could not be saved (the client goes on, with older files).
std::vector<std::string> save_carried_state(const ClientState& state, const CarriedState& carried);

}  // namespace tessera::client
