// SIGINT and SIGTERM taken synchronously: blocked in the calling thread (and every thread it
// starts afterwards) so one thread can sigwait() for them; SIGPIPE ignored, so a peer that
// hangs up is an error code rather than a crash. Call at start-up, before starting threads.
#pragma once

#include <csignal>

namespace tessera::common {

sigset_t block_stop_signals();

}  // namespace tessera::common
