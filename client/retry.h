// Retrying calls to the server: while a call fails transiently (no answer, 5xx, 429) wait
// with exponential backoff and try again; give up at once on a permanent failure, and as soon
// as `stopping()` turns true (checked every 100 ms while waiting).
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "api_result.h"
#include "backoff.h"
#include "logger.h"

namespace tessera::client {

struct RetryPolicy {
    std::chrono::milliseconds base = kBackoffBase;
    std::chrono::milliseconds cap = kBackoffCap;
};

// How often a wait looks whether it should stop (a stop, a pause or its end is seen this late).
constexpr std::chrono::milliseconds kStopCheckStep{100};

// Sleeps `duration` in kStopCheckStep steps; false (at once) when `stopping()` is or turns true.
inline bool sleep_unless_stopping(std::chrono::milliseconds duration, const std::function<bool()>& stopping) {
    constexpr auto kStep = kStopCheckStep;
    for (auto slept = std::chrono::milliseconds(0);; slept += kStep) {
        if (stopping()) return false;
        if (slept >= duration) return true;
        std::this_thread::sleep_for(std::min(kStep, duration - slept));
    }
}

template <class Call>
auto with_retries(Call&& call, const std::function<bool()>& stopping, const common::Logger& log,
                  const std::string& what, RetryPolicy policy = {}) -> decltype(call()) {
    Backoff backoff(policy.base, policy.cap);
    for (;;) {
        auto result = call();
        if (result || !result.error().transient()) return result;
        auto wait = backoff.next();
        char seconds[32];
        std::snprintf(seconds, sizeof seconds, "%.1f s", static_cast<double>(wait.count()) / 1000.0);
        log.error(what + " failed (" + result.message() + "); retrying in " + seconds);
        if (!sleep_unless_stopping(wait, stopping))
            return ApiFailure{FailureKind::Stopped,
                              what + ": stopped while waiting to retry (" + result.message() + ")"};
    }
}

}  // namespace tessera::client
