// Heartbeats for the unit being trained, from their own thread: every `interval` the server
// is asked whether the unit is still this volunteer's. When it answers no (the unit timed
// out, was retired or reassigned), told_to_stop() turns true and training gives the unit up.
// A heartbeat that gets no answer, or any other error, is simply tried again at the next
// interval. The heartbeats use their own HTTP client (`http`: its timeout bounds how long
// the destructor can wait for one in flight).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "logger.h"
#include "server_api.h"

namespace tessera::client {

class HeartbeatSender {
public:
    HeartbeatSender(const ServerApi& api, HttpOptions http, std::string wu_id, std::chrono::milliseconds interval,
                    const common::Logger& log);
    ~HeartbeatSender() = default;  // the jthread asks its loop to stop and joins it
    HeartbeatSender(const HeartbeatSender&) = delete;
    HeartbeatSender& operator=(const HeartbeatSender&) = delete;

    bool told_to_stop() const { return told_to_stop_; }
    int sent() const { return sent_; }

private:
    void run(std::stop_token stop);

    HttpClient http_;
    ServerApi api_;
    std::string wu_id_;
    std::chrono::milliseconds interval_;
    const common::Logger& log_;
    std::atomic<bool> told_to_stop_{false};
    std::atomic<int> sent_{0};
    std::mutex mutex_;
    std::condition_variable_any wake_;
    std::jthread thread_;  // last: started after everything it reads
};

}  // namespace tessera::client
