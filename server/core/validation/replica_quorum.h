// The quorum of a replicated unit, as BOINC decides one: two results that agree stand (one
// of them is merged); a pair that disagrees is not refused, a third replica is issued and the
// majority stands; results that agree with no other are refused; with kMaxReplicas results
// and no two agreeing, all are refused and the unit is computed again (docs/operations.md,
// "Replication").
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace tessera::server {

constexpr std::int64_t kMaxReplicas = 3;

struct QuorumDecision {
    enum class Kind {
        Wait,      // fewer than two results, or a tie-break replica is still out
        Tiebreak,  // no two results agree: issue one more replica
        Settle,    // accept `agreeing`, refuse `outliers`
    };
    Kind kind = Kind::Wait;
    std::vector<std::size_t> agreeing;  // indices into the unit's validated results
    std::vector<std::size_t> outliers;
};

// `count` validated results of a unit that asked for `replicas`; `agree(i, j)` compares two.
QuorumDecision decide_quorum(std::size_t count, std::int64_t replicas,
                             const std::function<bool(std::size_t, std::size_t)>& agree);

}  // namespace tessera::server
