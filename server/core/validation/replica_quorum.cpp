// The quorum decision: a result stands when another agrees with it.
#include "replica_quorum.h"

namespace tessera::server {

QuorumDecision decide_quorum(std::size_t count, std::int64_t replicas,
                             const std::function<bool(std::size_t, std::size_t)>& agree) {
    QuorumDecision decision;
    if (count < 2) return decision;
    std::vector<bool> has_partner(count, false);
    for (std::size_t i = 0; i < count; ++i)
        for (std::size_t j = i + 1; j < count; ++j)
            if (agree(i, j)) has_partner[i] = has_partner[j] = true;
    for (std::size_t i = 0; i < count; ++i) (has_partner[i] ? decision.agreeing : decision.outliers).push_back(i);
    if (!decision.agreeing.empty() || static_cast<std::int64_t>(count) >= kMaxReplicas) {
        decision.kind = QuorumDecision::Kind::Settle;
        return decision;
    }
    decision.agreeing.clear();
    decision.outliers.clear();
    decision.kind = static_cast<std::int64_t>(count) < replicas ? QuorumDecision::Kind::Wait
                                                                 : QuorumDecision::Kind::Tiebreak;
    return decision;
}

}  // namespace tessera::server
