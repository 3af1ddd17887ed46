// The store's volunteers: registration, the Sybil limit, request nonces, bans and quarantine
// (store_clients.cpp). One part of Store (store.h): a component given only this part sees only
// these calls.
#pragma once

#include <atomic>
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

class ClientStore : protected virtual StoreCore {
public:
    // Clients. Registering a known key returns the existing client (its name and version
    // updated, its first address kept). A new key is refused (nullopt) when `limit.max` (> 0)
    // volunteers registered from `address` since `limit.since`.
    common::Result<std::optional<ClientRecord>> register_client(const std::string& public_key, const std::string& name,
                                                                const std::string& client_version,
                                                                const std::string& address, std::int64_t now,
                                                                RegistrationLimit limit = {});
    common::Result<std::optional<ClientRecord>> client(const std::string& id);
    common::Status note_client_seen(const std::string& id, const std::string& device, double samples_per_s,
                                    std::int64_t now);
    // False when the nonce was already used: a replay. Forgets nonces older than twice the
    // window, at most once per window (the pruning scans the table).
    common::Result<bool> claim_nonce(const std::string& client_id, const std::string& nonce, std::int64_t now,
                                     std::int64_t window_s);
    common::Status set_client_banned(const std::string& id, bool banned, std::int64_t now);
    common::Result<std::vector<ClientRecord>> clients();  // by credit, highest first
    // New volunteers registered from `address` since `since` (the Sybil limit).
    common::Result<std::int64_t> registrations_from(const std::string& address, std::int64_t since);
    // Results of the volunteer refused since `since` (the quarantine rule), not counting
    // refusals that judge no delta (work_unit_retired, replica_unresolved).
    common::Result<std::int64_t> rejections_since(const std::string& client_id, std::int64_t since);
    // Where the span since the volunteer's last clean replay audit starts: the second after its
    // newest `audit_passed` event (a scan of those events, made only when an audit fails), or
    // its registration if it never passed one.
    common::Result<std::int64_t> since_clean_audit(const std::string& client_id);
    // The credit of the volunteer's results returned at or after `since` withdrawn (a failed
    // replay audit, docs/operations.md): set to 0 and taken off its total, with a
    // `credit_withdrawn` event. Returns those results' ids.
    struct WithdrawnCredit {
        std::vector<std::string> results;
        double credit = 0;
    };
    common::Result<WithdrawnCredit> withdraw_credit_since(const std::string& client_id, std::int64_t since,
                                                          const std::string& why, std::int64_t now);
    // False when it already was (or was not); entering quarantine resets the valid streak.
    common::Result<bool> set_client_quarantined(const std::string& id, bool quarantined, const std::string& why,
                                                std::int64_t now);

protected:
    ClientStore() = default;

private:
    std::atomic<std::int64_t> nonces_pruned_at_{0};
};

}  // namespace tessera::server
