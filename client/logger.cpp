// Logger: text or JSON lines.
#include "logger.h"

#include <boost/json/serialize.hpp>

#include <iostream>
#include <mutex>

#include "server_api.h"

namespace tessera::client {
namespace {

// One for every Logger of the process (a loop per server, the watcher, heartbeats), so that
// lines never interleave on stdout or stderr.
std::mutex output_mutex;

}  // namespace

void Logger::info(const std::string& event, const std::string& text, boost::json::object fields) const {
    std::lock_guard lock(output_mutex);
    if (json_) {
        fields["event"] = event;
        fields["message"] = text;
        fields["time"] = unix_now();
        if (!source_.empty()) fields["server"] = source_;
        std::cout << boost::json::serialize(fields) << std::endl;
    } else if (!quiet_) {
        std::cout << (source_.empty() ? "" : "[" + source_ + "] ") << text << std::endl;
    }
}

void Logger::error(const std::string& text) const {
    if (json_) return info("error", text);
    std::lock_guard lock(output_mutex);
    std::cerr << "tessera-client: " << (source_.empty() ? "" : "[" + source_ + "] ") << text << std::endl;
}

}  // namespace tessera::client
