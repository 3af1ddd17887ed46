// The soak's record: acknowledged uploads, latency windows, outcome counts.
#include "soak_record.h"

#include <cstdio>
#include <sstream>

#include "percentile.h"

namespace tessera::bench {

SoakRecord::SoakRecord(const std::filesystem::path& acks) : acks_(acks, std::ios::app) {}

void SoakRecord::acknowledged(const std::string& wu_id, const std::string& client_id, SenderRole role) {
    std::lock_guard lock(mutex_);
    acks_ << wu_id << ' ' << client_id << ' ' << (role == SenderRole::Honest ? "honest" : "hostile") << '\n';
    acks_.flush();
    ++acknowledged_;
}

void SoakRecord::request(const std::string& route, double milliseconds, const std::string& outcome,
                         const std::string& message) {
    auto minute = std::chrono::duration_cast<std::chrono::minutes>(Clock::now() - started_).count();
    std::lock_guard lock(mutex_);
    auto& window = windows_[{minute, route}];
    window.milliseconds.push_back(milliseconds);
    if (outcome != "ok") ++window.failures;
    ++counts_[route + ": " + outcome];
    if (!message.empty()) {
        auto line = message.substr(0, 200);
        for (auto& c : line)
            if (c == '\n' || c == '\r' || c == '\t') c = ' ';
        first_messages_.try_emplace(route + ": " + outcome, std::move(line));
    }
}

void SoakRecord::count(const std::string& what) {
    std::lock_guard lock(mutex_);
    ++counts_[what];
}

void SoakRecord::write_latency_csv(const std::filesystem::path& path) const {
    std::lock_guard lock(mutex_);
    std::ofstream out(path);
    out << "minute,route,requests,p50_ms,p99_ms,max_ms,failures\n";
    char line[256];
    for (const auto& [key, window] : windows_) {
        std::snprintf(line, sizeof line, "%lld,%s,%zu,%.1f,%.1f,%.1f,%lld\n", static_cast<long long>(key.first),
                      key.second.c_str(), window.milliseconds.size(), percentile(window.milliseconds, 0.5),
                      percentile(window.milliseconds, 0.99), percentile(window.milliseconds, 1.0),
                      static_cast<long long>(window.failures));
        out << line;
    }
}

std::string SoakRecord::tally() const {
    std::lock_guard lock(mutex_);
    std::ostringstream out;
    for (const auto& [name, count] : counts_) {
        out << "  " << name << ": " << count << "\n";
        if (auto first = first_messages_.find(name); first != first_messages_.end())
            out << "    first: " << first->second << "\n";
    }
    return out.str();
}

std::int64_t SoakRecord::acknowledged_count() const {
    std::lock_guard lock(mutex_);
    return acknowledged_;
}

}  // namespace tessera::bench
