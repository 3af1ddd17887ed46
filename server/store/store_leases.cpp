// Leases: one row per role, taken by an upsert that only succeeds when the row is free,
// expired or the claimant's own; the same statement on SQLite and PostgreSQL.
#include "store_internal.h"

namespace tessera::server {

common::Result<bool> LeaseStore::claim_lease(const LeaseClaim& claim, std::int64_t now, std::int64_t expires_at) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        Statement(db(),
                  "INSERT INTO leases (name, holder, expires_at) VALUES (?, ?, ?) "
                  "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at "
                  "WHERE leases.holder = excluded.holder OR leases.expires_at < ?")
            .bind(1, claim.name)
            .bind(2, claim.holder)
            .bind(3, expires_at)
            .bind(4, now)
            .run();
        bool held = db().changes() == 1;
        transaction.commit();
        return held;
    });
}

common::Status LeaseStore::release_lease(const LeaseClaim& claim) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(), "DELETE FROM leases WHERE name = ? AND holder = ?").bind(1, claim.name).bind(2, claim.holder).run();
        transaction.commit();
        return {};
    });
}

common::Result<std::optional<LeaseRecord>> LeaseStore::lease(const std::string& name) {
    return reading([&]() -> common::Result<std::optional<LeaseRecord>> {
        Statement row(db(), "SELECT name, holder, expires_at FROM leases WHERE name = ?");
        row.bind(1, name);
        if (!row.step()) return std::optional<LeaseRecord>();
        return std::optional<LeaseRecord>(LeaseRecord{row.text(0), row.text(1), row.integer(2)});
    });
}

}  // namespace tessera::server
