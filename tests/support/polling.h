// Small helpers of the tests that drive real processes: a variable meson sets, and waiting
// for a condition with a limit.
#pragma once

#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>

namespace tessera::testing {

// The value of an environment variable meson sets for the test; an error without it.
inline std::string required_env(const char* name) {
    const char* value = std::getenv(name);
    if (value == nullptr) throw std::runtime_error(std::string(name) + " is not set (meson sets it)");
    return value;
}

// Polls `condition` every 250 ms until it holds or `limit` has passed; whether it held.
template <class Condition>
bool wait_for(Condition&& condition, std::chrono::seconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (condition()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    return condition();
}

}  // namespace tessera::testing
