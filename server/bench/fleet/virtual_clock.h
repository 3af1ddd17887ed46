// The fleet simulator's clock: virtual seconds that only move forward, shown to the server's
// components as the unix-seconds Clock they take.
#pragma once

#include <atomic>
#include <cmath>
#include <string>

#include "result.h"
#include "clock.h"
#include "state_dir.h"

namespace tessera::bench {

class VirtualClock {
public:
    // Virtual second 0 as unix time (any fixed instant: runs must not depend on the date).
    static constexpr std::int64_t kEpoch = 1'800'000'000;

    double now() const { return now_.load(); }
    common::Status advance_to(double seconds) {
        if (!(seconds >= now_.load()))
            return common::make_error("virtual time would run backwards: from " + std::to_string(now_.load()) +
                                      " s to " + std::to_string(seconds) + " s");
        now_ = seconds;
        return {};
    }
    // Borrows this clock: it must outlive the returned function's users.
    server::Clock as_clock() const {
        return [this] { return kEpoch + static_cast<std::int64_t>(std::floor(now_.load())); };
    }

private:
    std::atomic<double> now_{0};  // the server's threads read it (the aggregator, the lease's renewal)
};

}  // namespace tessera::bench
