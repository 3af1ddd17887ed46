// Store: volunteers (registration, last seen, bans, quarantine) and request nonces.
#include <openssl/rand.h>

#include "store_internal.h"
#include "text_encoding.h"

namespace tessera::server {

ClientRecord read_client(const Statement& row, int first) {
    ClientRecord c;
    c.id = row.text(first);
    c.public_key = row.text(first + 1);
    c.name = row.text(first + 2);
    c.client_version = row.text(first + 3);
    c.registered_at = row.integer(first + 4);
    c.last_seen = row.integer(first + 5);
    c.device = row.text(first + 6);
    c.samples_per_s = row.real(first + 7);
    c.valid_streak = row.integer(first + 8);
    c.accepted = row.integer(first + 9);
    c.rejected = row.integer(first + 10);
    c.credit = row.real(first + 11);
    c.banned = row.integer(first + 12) != 0;
    c.quarantined = row.integer(first + 13) != 0;
    c.address = row.text(first + 14);
    return c;
}

namespace {

std::string new_client_id() {
    common::Bytes random(6);
    if (RAND_bytes(random.data(), static_cast<int>(random.size())) != 1)
        throw DatabaseError("the system random generator failed");
    return "c-" + common::to_hex(random);
}

}  // namespace

common::Result<std::optional<ClientRecord>> ClientStore::register_client(const std::string& public_key,
                                                                         const std::string& name,
                                                                         const std::string& client_version,
                                                                         const std::string& address, std::int64_t now,
                                                                         RegistrationLimit limit) {
    return guarded([&]() -> common::Result<std::optional<ClientRecord>> {
        Transaction transaction(db());
        Statement existing(db(), std::string("SELECT ") + kClientColumns + " FROM clients c WHERE public_key = ?");
        existing.bind(1, public_key);
        if (existing.step()) {
            auto client = read_client(existing);
            Statement(db(), "UPDATE clients SET name = ?, client_version = ?, last_seen = ? WHERE id = ?")
                .bind(1, name)
                .bind(2, client_version)
                .bind(3, now)
                .bind(4, client.id)
                .run();
            transaction.commit();
            return std::optional<ClientRecord>(client);
        }
        if (limit.max > 0) {
            Statement recent(db(), "SELECT COUNT(*) FROM clients WHERE address = ? AND registered_at >= ?");
            recent.bind(1, address).bind(2, limit.since).step();
            if (recent.integer(0) >= limit.max) return std::optional<ClientRecord>();
        }
        ClientRecord client;
        client.id = new_client_id();
        client.public_key = public_key;
        client.name = name;
        client.client_version = client_version;
        client.registered_at = client.last_seen = now;
        client.address = address;
        Statement(db(),
                  "INSERT INTO clients(id, public_key, name, client_version, registered_at, last_seen, address) "
                  "VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(1, client.id)
            .bind(2, public_key)
            .bind(3, name)
            .bind(4, client_version)
            .bind(5, now)
            .bind(6, now)
            .bind(7, address)
            .run();
        insert_event(db(), "client_registered", {{"client_id", client.id}, {"name", name}}, now);
        transaction.commit();
        return std::optional<ClientRecord>(client);
    });
}

common::Result<std::optional<ClientRecord>> ClientStore::client(const std::string& id) {
    return reading([&]() -> common::Result<std::optional<ClientRecord>> {
        Statement query(db(), std::string("SELECT ") + kClientColumns + " FROM clients c WHERE id = ?");
        query.bind(1, id);
        if (!query.step()) return std::optional<ClientRecord>();
        return std::optional<ClientRecord>(read_client(query));
    });
}

common::Status ClientStore::note_client_seen(const std::string& id, const std::string& device, double samples_per_s,
                                             std::int64_t now) {
    return guarded([&]() -> common::Status {
        Statement(db(), "UPDATE clients SET last_seen = ?, device = ?, samples_per_s = ? WHERE id = ?")
            .bind(1, now)
            .bind(2, device)
            .bind(3, samples_per_s)
            .bind(4, id)
            .run();
        return {};
    });
}

common::Result<bool> ClientStore::claim_nonce(const std::string& client_id, const std::string& nonce, std::int64_t now,
                                              std::int64_t window_s) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        if (now - nonces_pruned_at_ >= window_s) {
            Statement(db(), "DELETE FROM request_nonces WHERE seen_at < ?").bind(1, now - 2 * window_s).run();
            nonces_pruned_at_ = now;
        }
        Statement insert(db(), "INSERT INTO request_nonces(client_id, nonce, seen_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING");
        insert.bind(1, client_id).bind(2, nonce).bind(3, now).run();
        bool fresh = db().changes() == 1;
        transaction.commit();
        return fresh;
    });
}

common::Status ClientStore::set_client_banned(const std::string& id, bool banned, std::int64_t now) {
    return guarded([&]() -> common::Status {
        Transaction transaction(db());
        Statement(db(), "UPDATE clients SET banned = ? WHERE id = ?").bind(1, banned ? 1 : 0).bind(2, id).run();
        if (db().changes() != 1) return common::make_error("no client '" + id + "'");
        insert_event(db(), banned ? "client_banned" : "client_unbanned", {{"client_id", id}}, now);
        transaction.commit();
        return {};
    });
}

common::Result<std::int64_t> ClientStore::registrations_from(const std::string& address, std::int64_t since) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(), "SELECT COUNT(*) FROM clients WHERE address = ? AND registered_at >= ?");
        query.bind(1, address).bind(2, since).step();
        return query.integer(0);
    });
}

common::Result<std::int64_t> ClientStore::rejections_since(const std::string& client_id, std::int64_t since) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement query(db(),
                        "SELECT COUNT(*) FROM rejections WHERE client_id = ? AND at >= ? "
                        "AND reason NOT IN ('work_unit_retired', 'replica_unresolved', 'too_stale')");
        query.bind(1, client_id).bind(2, since).step();
        return query.integer(0);
    });
}

common::Result<bool> ClientStore::set_client_quarantined(const std::string& id, bool quarantined,
                                                         const std::string& why, std::int64_t now) {
    return guarded([&]() -> common::Result<bool> {
        Transaction transaction(db());
        // Entering quarantine starts a new streak: only valid results from now on lift it.
        Statement(db(),
                  "UPDATE clients SET quarantined = ?, valid_streak = CASE WHEN ? = 1 THEN 0 ELSE valid_streak END "
                  "WHERE id = ? AND quarantined != ?")
            .bind(1, quarantined ? 1 : 0)
            .bind(2, quarantined ? 1 : 0)
            .bind(3, id)
            .bind(4, quarantined ? 1 : 0)
            .run();
        if (db().changes() != 1) return false;
        insert_event(db(), quarantined ? "client_quarantined" : "client_released", {{"client_id", id}, {"why", why}},
                     now);
        transaction.commit();
        return true;
    });
}

common::Result<std::int64_t> ClientStore::since_clean_audit(const std::string& client_id) {
    return reading([&]() -> common::Result<std::int64_t> {
        Statement passed(db(), "SELECT MAX(at) FROM events WHERE kind = 'audit_passed' AND detail LIKE ?");
        passed.bind(1, "%\"client_id\":" + boost::json::serialize(boost::json::value(client_id)) + "%");
        if (passed.step() && !passed.is_null(0)) return passed.integer(0) + 1;
        Statement registered(db(), "SELECT registered_at FROM clients WHERE id = ?");
        registered.bind(1, client_id);
        return registered.step() ? registered.integer(0) : std::int64_t{0};
    });
}

common::Result<ClientStore::WithdrawnCredit> ClientStore::withdraw_credit_since(const std::string& client_id,
                                                                                std::int64_t since,
                                                                                const std::string& why,
                                                                                std::int64_t now) {
    return guarded([&]() -> common::Result<WithdrawnCredit> {
        Transaction transaction(db());
        WithdrawnCredit withdrawn;
        Statement credited(db(),
                           "SELECT id, credit FROM assignments WHERE client_id = ? AND returned_at >= ? AND credit > 0 "
                           "ORDER BY returned_at, id");
        credited.bind(1, client_id).bind(2, since);
        while (credited.step()) {
            withdrawn.results.push_back(credited.text(0));
            withdrawn.credit += credited.real(1);
        }
        if (withdrawn.results.empty()) return withdrawn;
        Statement(db(), "UPDATE assignments SET credit = 0 WHERE client_id = ? AND returned_at >= ? AND credit > 0")
            .bind(1, client_id)
            .bind(2, since)
            .run();
        Statement(db(), "UPDATE clients SET credit = credit - ? WHERE id = ?")
            .bind(1, withdrawn.credit)
            .bind(2, client_id)
            .run();
        boost::json::array ids;
        for (const auto& id : withdrawn.results) ids.emplace_back(id);
        insert_event(
            db(), "credit_withdrawn",
            {{"client_id", client_id}, {"since", since}, {"credit", withdrawn.credit}, {"results", ids}, {"why", why}},
            now);
        transaction.commit();
        return withdrawn;
    });
}

common::Result<std::vector<ClientRecord>> ClientStore::clients() {
    return reading([&]() -> common::Result<std::vector<ClientRecord>> {
        Statement query(db(), std::string("SELECT ") + kClientColumns + " FROM clients c ORDER BY credit DESC, id");
        std::vector<ClientRecord> rows;
        while (query.step()) rows.push_back(read_client(query));
        return rows;
    });
}

}  // namespace tessera::server
