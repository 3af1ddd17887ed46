// The I/O-thread mark: one thread-local flag.
#include "io_thread.h"

namespace tessera::server {
namespace {

thread_local bool io_thread = false;

}  // namespace

void mark_io_thread() { io_thread = true; }
bool on_io_thread() { return io_thread; }

}  // namespace tessera::server
