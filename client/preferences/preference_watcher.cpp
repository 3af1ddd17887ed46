// The watcher's loop: read, decide, report a change, sleep until the next interval or the end.
#include "preference_watcher.h"

namespace tessera::client {

PreferenceWatcher::PreferenceWatcher(WorkPreferences preferences, std::shared_ptr<MachineSensors> sensors,
                                     std::chrono::milliseconds interval, OnChange on_change)
    : preferences_(std::move(preferences)), sensors_(std::move(sensors)), interval_(interval),
      on_change_(std::move(on_change)) {
    check();
    thread_ = std::jthread([this](std::stop_token stop) { run(std::move(stop)); });
}

void PreferenceWatcher::check() {
    auto reason = reason_to_wait(preferences_, sensors_->read(preferences_));
    if (reason == reason_) return;
    reason_ = reason;
    holding_ = reason.has_value();
    if (on_change_) on_change_(reason_);
}

void PreferenceWatcher::run(std::stop_token stop) {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, stop, interval_, [] { return false; });  // a stop request wakes it
        }
        if (stop.stop_requested()) return;
        check();
    }
}

}  // namespace tessera::client
