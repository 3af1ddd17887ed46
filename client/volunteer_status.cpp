// The status board: plain fields behind one mutex, read out as JSON.
#include "volunteer_status.h"

#include <boost/json.hpp>

namespace tessera::client {

void VolunteerStatus::set_identity(const std::string& server, const std::string& client_id, const std::string& device) {
    std::lock_guard lock(mutex_);
    server_ = server;
    client_id_ = client_id;
    device_ = device;
}

void VolunteerStatus::set_phase(const std::string& phase) {
    std::lock_guard lock(mutex_);
    phase_ = phase;
}

void VolunteerStatus::set_unit(const std::string& wu_id, std::int64_t steps) {
    std::lock_guard lock(mutex_);
    wu_id_ = wu_id;
    steps_ = steps;
    step_ = 0;
}

void VolunteerStatus::set_progress(std::int64_t step) {
    std::lock_guard lock(mutex_);
    step_ = step;
}

void VolunteerStatus::set_preferences(std::vector<std::string> preferences) {
    std::lock_guard lock(mutex_);
    preferences_ = std::move(preferences);
}

void VolunteerStatus::set_waiting_because(const std::string& reason) {
    std::lock_guard lock(mutex_);
    waiting_because_ = reason;
}

void VolunteerStatus::set_worked_seconds(double seconds) {
    std::lock_guard lock(mutex_);
    worked_s_ = seconds;
}

void VolunteerStatus::add_result(const std::string& wu_id, const std::string& state, const std::string& reason,
                                 double credit) {
    std::lock_guard lock(mutex_);
    verdicts_.push_front({wu_id, state, reason, credit});
    if (verdicts_.size() > kVerdictsKept) verdicts_.pop_back();
    ++units_;
    if (state == "merged" || state == "accepted" || state == "confirmed") credit_ += credit;
}

void VolunteerStatus::add_transfers(std::int64_t downloaded_bytes, std::int64_t uploaded_bytes) {
    std::lock_guard lock(mutex_);
    downloaded_bytes_ += downloaded_bytes;
    uploaded_bytes_ += uploaded_bytes;
}

boost::json::object VolunteerStatus::to_json() const {
    std::lock_guard lock(mutex_);
    boost::json::array verdicts;
    for (const auto& v : verdicts_)
        verdicts.push_back({{"wu_id", v.wu_id}, {"state", v.state}, {"reason", v.reason}, {"credit", v.credit}});
    boost::json::array preferences(preferences_.begin(), preferences_.end());
    return {{"server", server_},
            {"client_id", client_id_},
            {"device", device_},
            {"phase", phase_},
            {"preferences", std::move(preferences)},
            {"waiting_because", waiting_because_},
            {"wu_id", wu_id_},
            {"step", step_},
            {"steps", steps_},
            {"units_done", units_},
            {"credit", credit_},
            {"worked_s", worked_s_},
            {"downloaded_bytes", downloaded_bytes_},
            {"uploaded_bytes", uploaded_bytes_},
            {"last_results", std::move(verdicts)}};
}

}  // namespace tessera::client
