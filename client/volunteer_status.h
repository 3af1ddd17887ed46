// What `tessera-client status` shows of a running client: where its loop is, the unit in hand
// and its progress, the preferences in force and why they hold work, the last verdicts, and the
// credit earned and bytes moved since it started. Written by the volunteer's loop, read by the
// local control socket's thread; safe from several threads.
#pragma once

#include <boost/json/object.hpp>

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::client {

class VolunteerStatus {
public:
    void set_identity(const std::string& server, const std::string& client_id, const std::string& device);
    void set_phase(const std::string& phase);
    void set_unit(const std::string& wu_id, std::int64_t steps);  // "" when none is in hand
    void set_progress(std::int64_t step);
    // The preferences in force ("not on battery", …) and why they hold work now ("" when not).
    void set_preferences(std::vector<std::string> preferences);
    void set_waiting_because(const std::string& reason);
    // Among several servers: the machine's time this server's turns have taken, this run.
    void set_worked_seconds(double seconds);
    // A unit's verdict: accepted (with its credit), rejected (with the reason), or still open.
    void add_result(const std::string& wu_id, const std::string& state, const std::string& reason, double credit);
    // A unit's transfers: what was downloaded for it (blobs already held count nothing) and the
    // result uploaded.
    void add_transfers(std::int64_t downloaded_bytes, std::int64_t uploaded_bytes);
    boost::json::object to_json() const;

private:
    struct Verdict {
        std::string wu_id, state, reason;
        double credit = 0;
    };
    static constexpr std::size_t kVerdictsKept = 5;

    mutable std::mutex mutex_;
    std::string server_, client_id_, device_;
    std::string phase_ = "starting";
    std::vector<std::string> preferences_;
    std::string waiting_because_;
    std::string wu_id_;
    std::int64_t step_ = 0, steps_ = 0;
    std::deque<Verdict> verdicts_;
    double credit_ = 0;
    double worked_s_ = 0;
    std::int64_t units_ = 0;
    std::int64_t downloaded_bytes_ = 0, uploaded_bytes_ = 0;
};

}  // namespace tessera::client
