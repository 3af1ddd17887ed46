// The transitioner (BOINC's name): moves work along by time. Overdue assignments time out
// (their unit is reissued, or retired after too many failures), and a validated replica whose
// twin never came back is accepted alone. Run periodically; tests call tick() with their clock.
#pragma once

#include "store.h"
#include "validator.h"

namespace tessera::server {

struct TickReport {
    std::size_t timed_out = 0;
    std::size_t retired = 0;
    std::size_t accepted_alone = 0;
};

class Transitioner {
public:
    Transitioner(Store& store, Validator& validator, Clock clock)
        : store_(store), validator_(validator), clock_(std::move(clock)) {}
    common::Result<TickReport> tick();

private:
    Store& store_;
    Validator& validator_;
    Clock clock_;
};

}  // namespace tessera::server
