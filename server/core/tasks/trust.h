// A volunteer's standing, as the contribution checks and the scheduler use it (docs/
// operations.md, "Trust and quarantine"): new volunteers are checked on every result until
// they have a streak of valid ones (BOINC's adaptive replication); a quarantined volunteer
// holds one unit at a time, always replicated, until a new streak lifts the quarantine.
#pragma once

#include <algorithm>
#include <cstdint>

#include "records.h"
#include "task_config.h"

namespace tessera::server {

inline bool is_trusted(const TaskConfig& config, const ClientRecord& client) {
    return !client.quarantined && client.valid_streak >= config.trust_streak;
}

// The chance that a result is given the loss checks (its own samples and held-out data).
inline double loss_check_chance(const TaskConfig& config, const ClientRecord& client) {
    return is_trusted(config, client) ? config.loss_check : 1.0;
}

// The chance that a result is replayed (replay_audit.h): the task's `audit` for a trusted
// volunteer, kUntrustedAuditFactor times it for a new or quarantined one (whose results are few).
inline double audit_chance(const TaskConfig& config, const ClientRecord& client) {
    if (config.audit <= 0) return 0;
    return is_trusted(config, client) ? config.audit : std::min(1.0, kUntrustedAuditFactor * config.audit);
}

// The chance that a new unit for this volunteer is computed twice and compared (a task
// replicating every unit does so for everyone). A trusted volunteer's units are sampled by
// the replay audits where the task has them: a replica would be a second sampled replay at
// the same price (docs/operations.md, "What the checks cost").
inline double replication_chance(const TaskConfig& config, const ClientRecord& client) {
    if (client.quarantined || config.replication >= 1) return 1.0;
    if (!is_trusted(config, client)) return config.replication;
    return config.audit > 0 ? 0.0 : config.replication / 5;
}

inline std::int64_t in_flight_limit(const TaskConfig& config, const ClientRecord& client) {
    return client.quarantined ? 1 : config.max_in_flight;
}

}  // namespace tessera::server
