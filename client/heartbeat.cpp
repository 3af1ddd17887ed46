// HeartbeatSender: a thread that asks, waits, and asks again.
#include "heartbeat.h"

namespace tessera::client {

HeartbeatSender::HeartbeatSender(const ServerApi& api, HttpOptions http, std::string wu_id,
                                 std::chrono::milliseconds interval, const common::Logger& log)
    : http_(std::move(http)), api_(api.through(http_)), wu_id_(std::move(wu_id)), interval_(interval), log_(log),
      thread_([this](std::stop_token stop) { run(stop); }) {}

void HeartbeatSender::run(std::stop_token stop) {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            wake_.wait_for(lock, stop, interval_, [] { return false; });  // a stop request wakes it
        }
        if (stop.stop_requested()) return;
        auto answer = api_.heartbeat(wu_id_);
        ++sent_;
        // A unit the server no longer knows as ours (404) is as gone as one it says to stop;
        // any other failure (no answer, 5xx, a rejected signature) proves nothing.
        bool gone = answer ? !answer->keep_working : answer.error().http_status == 404;
        if (gone) {
            log_.info("told_to_stop",
                      wu_id_ +
                          ": the server no longer wants this unit (timed out, retired or "
                          "reassigned); giving it up",
                      {{"wu_id", wu_id_}});
            told_to_stop_ = true;
            return;
        }
    }
}

}  // namespace tessera::client
