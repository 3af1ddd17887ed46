// Which member of an expert group a volunteer keeps: in proportion to the members' weights over
// many volunteers, the same answer every time, and only the volunteers of a member that leaves
// move.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "expert_affinity.h"

using tessera::server::GroupMember;
using tessera::server::sticky_member;

namespace {

std::vector<std::size_t> members_of(const std::vector<GroupMember>& members, int volunteers) {
    std::vector<std::size_t> chosen;
    for (int v = 0; v < volunteers; ++v) chosen.push_back(sticky_member("c-" + std::to_string(v), members));
    return chosen;
}

}  // namespace

TEST_CASE("volunteers spread over a group's members by weight, each keeping its member") {
    std::vector<GroupMember> members{{"g-e0", 1}, {"g-e1", 2}, {"g-e2", 3}};
    constexpr int kVolunteers = 20000;
    auto chosen = members_of(members, kVolunteers);
    std::vector<int> counts(3);
    for (auto m : chosen) counts[m] += 1;
    for (std::size_t k = 0; k < 3; ++k)
        CHECK(static_cast<double>(counts[k]) / kVolunteers == doctest::Approx((k + 1) / 6.0).epsilon(0.05));
    CHECK(members_of(members, kVolunteers) == chosen);  // the same answer on every request
}

TEST_CASE("when a member leaves only its volunteers move, and they spread over the rest") {
    std::vector<GroupMember> members{{"g-e0", 1}, {"g-e1", 1}, {"g-e2", 1}, {"g-router", 1}};
    auto before = members_of(members, 4000);
    auto without = members;
    without.erase(without.begin() + 1);  // g-e1 paused
    auto after = members_of(without, 4000);
    std::vector<int> moved_to(3);
    for (std::size_t v = 0; v < before.size(); ++v) {
        const auto& was = members[before[v]].task_id;
        const auto& now = without[after[v]].task_id;
        if (was != "g-e1")
            CHECK(now == was);
        else
            moved_to[after[v]] += 1;
    }
    for (auto n : moved_to) CHECK(n > 200);  // about 1000 / 3 each
    CHECK(sticky_member("anyone", {{"only", 0.5}}) == 0);
}
