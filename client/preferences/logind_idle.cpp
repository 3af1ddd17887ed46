// logind's view of the user: its Manager's IdleHint is true when every session is idle, and
// IdleSinceHint says since when (CLOCK_REALTIME, microseconds). Desktops set it when the
// screen saver starts, so this is the idle source for a graphical session.
#include "machine_sensors.h"

#ifdef TESSERA_HAVE_LIBSYSTEMD
#include <systemd/sd-bus.h>

#include <ctime>
#endif

namespace tessera::client {

#ifdef TESSERA_HAVE_LIBSYSTEMD
std::optional<double> logind_idle_seconds() {
    sd_bus* bus = nullptr;
    if (sd_bus_open_system(&bus) < 0) return std::nullopt;
    constexpr const char* kService = "org.freedesktop.login1";
    constexpr const char* kPath = "/org/freedesktop/login1";
    constexpr const char* kInterface = "org.freedesktop.login1.Manager";
    sd_bus_error error = SD_BUS_ERROR_NULL;
    int idle = 0;
    std::uint64_t since_us = 0;
    int read_hint = sd_bus_get_property_trivial(bus, kService, kPath, kInterface, "IdleHint", &error, 'b', &idle);
    sd_bus_error_free(&error);
    int read_since = read_hint < 0 ? read_hint
                                   : sd_bus_get_property_trivial(bus, kService, kPath, kInterface, "IdleSinceHint",
                                                                 &error, 't', &since_us);
    sd_bus_error_free(&error);
    sd_bus_flush_close_unref(bus);
    if (read_hint < 0 || read_since < 0) return std::nullopt;
    if (!idle) return 0.0;
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    double now_us = static_cast<double>(now.tv_sec) * 1e6 + static_cast<double>(now.tv_nsec) / 1e3;
    return since_us == 0 || now_us < static_cast<double>(since_us) ? std::nullopt
                                                                   : std::optional((now_us - since_us) / 1e6);
}
#else
std::optional<double> logind_idle_seconds() { return std::nullopt; }
#endif

}  // namespace tessera::client
