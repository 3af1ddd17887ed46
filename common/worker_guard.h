// The exception boundary of a worker thread (the server's work pool, aggregator, validation
// poller, group commit, election, transitioner): a job that throws is logged with the
// worker's name and counted, and the thread goes on serving. Without it an exception escaping
// a std::thread ends the process, and a pool's bookkeeping (jobs pending) is never released.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace tessera::common {

// Runs `job`: true when it returned, false when it threw (logged as the error
// "worker_failed" with the worker's name and what was thrown).
bool run_guarded(std::string_view worker, const std::function<void()>& job) noexcept;

// Jobs that threw since the process started, by worker name (for /metrics).
std::map<std::string, std::uint64_t> worker_failures();

}  // namespace tessera::common
