// Weighted rendezvous hashing: the member with the least −ln(u)/w, u uniform from a hash.
#include "expert_affinity.h"

#include <cmath>
#include <limits>

#include "bytes.h"
#include "sha256.h"

namespace tessera::server {
namespace {

// A uniform number in (0, 1) from SHA-256 of the volunteer's and the member's ids.
double uniform_of(const std::string& client_id, const std::string& task_id) {
    auto digest = common::sha256(common::as_bytes(client_id + '\n' + task_id));
    std::uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | digest[static_cast<std::size_t>(i)];
    return (static_cast<double>(bits >> 11) + 0.5) / 9007199254740992.0;  // 53 bits
}

}  // namespace

std::size_t sticky_member(const std::string& client_id, const std::vector<GroupMember>& members) {
    std::size_t best = 0;
    double best_score = std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < members.size(); ++i) {
        // −ln(u)/w is exponential with rate w: the least of them is member i with chance w_i / Σw.
        auto score = -std::log(uniform_of(client_id, members[i].task_id)) / members[i].weight;
        if (score < best_score) {
            best_score = score;
            best = i;
        }
    }
    return best;
}

}  // namespace tessera::server
