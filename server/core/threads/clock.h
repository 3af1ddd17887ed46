// Time as the server's components take it: seconds since the epoch, injected so that tests
// move it by hand.
#pragma once

#include <cstdint>
#include <functional>

namespace tessera::server {

using Clock = std::function<std::int64_t()>;
Clock system_clock();

}  // namespace tessera::server
