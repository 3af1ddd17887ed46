// A one-line progress bar on stderr for long steps (downloads, training, encoding). On a
// terminal it redraws in place at most ten times a second; otherwise it stays silent until
// finish(), which prints one summary line. Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace tessera::common {

class ProgressBar {
public:
    ProgressBar(std::string label, std::int64_t total);
    ProgressBar(std::string label, std::int64_t total, bool interactive);
    void update(std::int64_t done, const std::string& detail = "");
    void finish(const std::string& summary);

private:
    std::string label_;
    std::int64_t total_;
    bool interactive_;
    std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace tessera::common
