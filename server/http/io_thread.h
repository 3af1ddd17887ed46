// The server's I/O threads only move bytes (http_server.h): nothing that may block on the
// database runs there. A thread that runs the io_context marks itself, and code that reads the
// store where a session could call it checks, so that a slip fails loudly in tests instead of
// stalling every connection on that thread.
#pragma once

namespace tessera::server {

// Marks the calling thread as one of the server's I/O threads (for its lifetime).
void mark_io_thread();
bool on_io_thread();

}  // namespace tessera::server
