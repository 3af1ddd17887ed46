// Loading and saving what a volunteer carries between units (carried_state.h).
#include "carried_state.h"

namespace tessera::client {

CarriedState load_carried_state(const ClientState& state, std::vector<std::string>& problems) {
    CarriedState carried;
    if (auto feedback = load_error_feedback(state.feedback_file()); feedback)
        carried.feedback = std::move(*feedback);
    else
        problems.push_back(feedback.message() + "; starting without the error-feedback residual");
    if (auto optimizer = load_optimizer_state(state.optimizer_file()); optimizer)
        carried.optimizer = std::move(*optimizer);
    else
        problems.push_back(optimizer.message() + "; starting with a fresh optimizer state");
    return carried;
}

std::vector<std::string> save_carried_state(const ClientState& state, const CarriedState& carried) {
    std::vector<std::string> problems;
    if (auto saved = save_error_feedback(state.feedback_file(), carried.feedback); !saved)
        problems.push_back(saved.message() + "; the next unit starts without the residual if the client restarts");
    if (auto saved = save_optimizer_state(state.optimizer_file(), carried.optimizer); !saved)
        problems.push_back(saved.message() +
                           "; the next unit starts from an older optimizer state if the client restarts");
    return problems;
}

}  // namespace tessera::client
