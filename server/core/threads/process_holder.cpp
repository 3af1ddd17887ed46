// Process holder names: host:pid:random.
#include "process_holder.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <random>

namespace tessera::server {
namespace {

std::string this_host() {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return host[0] ? host : "host";
}

}  // namespace

std::string process_holder_name() {
    std::random_device random;
    char suffix[9];
    std::snprintf(suffix, sizeof suffix, "%08x", random());
    return this_host() + ":" + std::to_string(::getpid()) + ":" + suffix;
}

bool holder_gone(const std::string& holder) {
    auto last = holder.rfind(':');
    if (last == std::string::npos || last == 0) return false;
    auto first = holder.rfind(':', last - 1);
    if (first == std::string::npos || holder.substr(0, first) != this_host()) return false;
    long pid = 0;
    auto digits = std::string_view(holder).substr(first + 1, last - first - 1);
    auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), pid);
    if (error != std::errc() || end != digits.data() + digits.size() || pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace tessera::server
