// Which member of an expert group a volunteer works on. A volunteer that moved between experts
// would download each expert's model and shards in turn; so within a group each volunteer keeps
// one member, chosen by weighted rendezvous hashing (highest random weight) of its id and the
// members' ids: member k with probability w_k / Σw over the fleet, the same answer in every
// server process and after a restart, and when a member leaves (finished, paused, excluded)
// only its volunteers move.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tessera::server {

struct GroupMember {
    std::string task_id;
    double weight = 0;  // > 0
};

// The index in `members` (non-empty) of the one the volunteer `client_id` works on.
std::size_t sticky_member(const std::string& client_id, const std::vector<GroupMember>& members);

}  // namespace tessera::server
