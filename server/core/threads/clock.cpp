#include "clock.h"

#include <chrono>

namespace tessera::server {

Clock system_clock() {
    return [] {
        return static_cast<std::int64_t>(
            std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
                .count());
    };
}

}  // namespace tessera::server
