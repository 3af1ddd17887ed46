// run_guarded: catch, log, count.
#include "worker_guard.h"

#include <exception>
#include <mutex>

#include "logger.h"

namespace tessera::common {
namespace {

std::mutex failures_mutex;
std::map<std::string, std::uint64_t> failures;

void count_failure(std::string_view worker, const std::string& what) noexcept {
    try {
        {
            std::lock_guard lock(failures_mutex);
            ++failures[std::string(worker)];
        }
        process_log().error("worker_failed", std::string(worker) + ": a job threw: " + what,
                            {{"worker", std::string(worker)}});
    } catch (...) {  // out of memory while reporting: the count or the line is lost, not the thread
    }
}

}  // namespace

bool run_guarded(std::string_view worker, const std::function<void()>& job) noexcept {
    try {
        job();
        return true;
    } catch (const std::exception& error) {
        count_failure(worker, error.what());
    } catch (...) {
        count_failure(worker, "an exception not derived from std::exception");
    }
    return false;
}

std::map<std::string, std::uint64_t> worker_failures() {
    std::lock_guard lock(failures_mutex);
    return failures;
}

}  // namespace tessera::common
