// Logger: text or JSON lines, one at a time.
#include "logger.h"

#include <boost/json/serialize.hpp>

#include <chrono>
#include <iostream>
#include <mutex>

namespace tessera::common {
namespace {

// One for every Logger of the process (a loop per server, the watcher, heartbeats, the
// server's stages), so that lines never interleave on stdout or stderr.
std::mutex output_mutex;

std::string_view level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Info: return "info";
        case LogLevel::Warning: return "warning";
        case LogLevel::Error: return "error";
    }
    return "info";
}

std::int64_t seconds_now() {
    return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

Logger& stored_process_log() {
    static Logger logger("tessera", false, false);
    return logger;
}

}  // namespace

void Logger::info(const std::string& event, const std::string& text, boost::json::object fields) const {
    write(LogLevel::Info, event, text, std::move(fields));
}

void Logger::warning(const std::string& event, const std::string& text, boost::json::object fields) const {
    write(LogLevel::Warning, event, text, std::move(fields));
}

void Logger::error(const std::string& event, const std::string& text, boost::json::object fields) const {
    write(LogLevel::Error, event, text, std::move(fields));
}

void Logger::write(LogLevel level, const std::string& event, const std::string& text,
                   boost::json::object fields) const {
    std::lock_guard lock(output_mutex);
    auto from = source_.empty() ? std::string() : "[" + source_ + "] ";
    if (json_) {
        fields["event"] = event;
        fields["level"] = level_name(level);
        fields["message"] = text;
        fields["time"] = seconds_now();
        if (!source_.empty()) fields["server"] = source_;
        std::cout << boost::json::serialize(fields) << std::endl;
    } else if (level != LogLevel::Info || (info_stream_ == InfoStream::Stderr && !quiet_)) {
        std::cerr << program_ << ": " << from << text << std::endl;
    } else if (!quiet_) {
        std::cout << from << text << std::endl;
    }
}

const Logger& process_log() { return stored_process_log(); }

void set_process_log(const Logger& logger) { stored_process_log() = logger; }

}  // namespace tessera::common
