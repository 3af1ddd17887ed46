// Progress bar drawing.
#include "progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace tessera::common {

ProgressBar::ProgressBar(std::string label, std::int64_t total)
    : ProgressBar(std::move(label), total, ::isatty(STDERR_FILENO) == 1) {}

ProgressBar::ProgressBar(std::string label, std::int64_t total, bool interactive)
    : label_(std::move(label)), total_(std::max<std::int64_t>(total, 1)), interactive_(interactive) {}

void ProgressBar::update(std::int64_t done, const std::string& detail) {
    if (!interactive_) return;
    auto now = std::chrono::steady_clock::now();
    if (done < total_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    constexpr int kWidth = 30;
    auto filled = static_cast<int>(kWidth * std::clamp<std::int64_t>(done, 0, total_) / total_);
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %lld/%lld %s\033[K", label_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), static_cast<int>(100 * done / total_),
                 static_cast<long long>(done), static_cast<long long>(total_), detail.c_str());
    std::fflush(stderr);
}

void ProgressBar::finish(const std::string& summary) {
    if (interactive_) std::fprintf(stderr, "\r\033[K");
    std::fprintf(stderr, "%s: %s\n", label_.c_str(), summary.c_str());
}

}  // namespace tessera::common
