// The store's leases: a role one server process holds at a time (store_leases.cpp). One part of
// Store (store.h): a component given only this part sees only these calls.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "records.h"
#include "result.h"
#include "store_core.h"

namespace tessera::server {

class LeaseStore : protected virtual StoreCore {
public:
    // Leases (store_leases.cpp): a role one server process holds at a time, such as a task's
    // aggregator. Takes or renews lease `claim.name` for `claim.holder` until `expires_at` when
    // it is free, expired at `now`, or already the holder's; true when the holder has it now.
    common::Result<bool> claim_lease(const LeaseClaim& claim, std::int64_t now, std::int64_t expires_at);
    // Gives it up (at shutdown: another process need not wait for it to expire).
    common::Status release_lease(const LeaseClaim& claim);
    common::Result<std::optional<LeaseRecord>> lease(const std::string& name);

protected:
    LeaseStore() = default;
};

}  // namespace tessera::server
