// Holds the volunteer's work while a preference says wait: a thread reads the sensors every
// `interval` and sets `held` (training waits between steps, no unit is asked for) with the
// reason on the status board. A manual `pause` is separate: resuming never overrides a
// preference, and a preference ending never resumes a manual pause.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "machine_sensors.h"
#include "work_preferences.h"

namespace tessera::client {

class PreferenceWatcher {
public:
    // Called from the watcher's thread when the answer changes: the reason to wait, or nothing.
    using OnChange = std::function<void(const std::optional<std::string>&)>;

    // Reads the sensors once before returning, so a client that must wait never starts work.
    PreferenceWatcher(WorkPreferences preferences, std::shared_ptr<MachineSensors> sensors,
                      std::chrono::milliseconds interval, OnChange on_change);
    ~PreferenceWatcher() = default;  // the jthread asks its loop to stop and joins it
    PreferenceWatcher(const PreferenceWatcher&) = delete;
    PreferenceWatcher& operator=(const PreferenceWatcher&) = delete;

    bool holding() const { return holding_; }

private:
    void check();
    void run(std::stop_token stop);

    WorkPreferences preferences_;
    std::shared_ptr<MachineSensors> sensors_;
    std::chrono::milliseconds interval_;
    OnChange on_change_;
    std::optional<std::string> reason_;
    std::atomic<bool> holding_{false};
    std::mutex mutex_;
    std::condition_variable_any wake_;
    std::jthread thread_;  // last: started after everything it reads
};

}  // namespace tessera::client
