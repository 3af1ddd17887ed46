// The running server: the server's components (server_core.h) with the HTTP server, the API,
// the dashboard, the event hub and the transitioner's timer; it resumes after a crash (orphan
// files removed, stored results validated, accepted results re-merged) and shuts down in
// order. Used by `tessera-server run` and by the in-process tests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "server_options.h"
#include "store.h"
#include "transitioner.h"
#include "validation_stage.h"

namespace tessera::server {

class ServerApp {
public:
    static common::Result<std::unique_ptr<ServerApp>> start(ServerOptions options);
    ~ServerApp();
    // Stops accepting, finishes queued validations and merges, closes the database.
    void stop();

    std::uint16_t port() const;
    Store& store();
    Transitioner& transitioner();
    ValidationStage& validation();
    // Whether this process runs the task's aggregator now (it holds the task's lease).
    bool leading(const std::string& task_id) const;
    // Serves tasks created (and drops tasks finished) since the last look; the watcher does
    // this every task_poll_ms.
    common::Status refresh_tasks();
    // Blocks until no validation or merge is queued or running (tests).
    void wait_idle();

    struct Parts;

private:
    explicit ServerApp(std::unique_ptr<Parts> parts);
    std::unique_ptr<Parts> parts_;
};

}  // namespace tessera::server
