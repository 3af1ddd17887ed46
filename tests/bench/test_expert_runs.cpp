// The experts' side of the fleet simulator without training: how a cluster folder's budget and
// fleet (by speed) are split among the experts and the router, and what is refused.
#include <doctest/doctest.h>

#include <map>
#include <set>

#include "expert_clusters.h"
#include "expert_runs.h"
#include "temp_dir.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// clusters.json of three experts of 100, 300 and 600 samples (the folders need not exist here).
std::filesystem::path three_clusters(const testing::TempDir& dir, std::int64_t experts = 3) {
    common::ClusterManifest m;
    m.source = "synthetic";
    m.experts = experts;
    m.features = "samples";
    m.feature_dim = 1;
    std::vector<std::int64_t> sizes{100, 300, 600};
    sizes.resize(static_cast<std::size_t>(experts));
    for (std::int64_t k = 0; k < experts; ++k) {
        m.sizes.push_back(sizes[static_cast<std::size_t>(k)]);
        m.validation_sizes.push_back(10);
        m.centres.push_back({static_cast<double>(k)});
        m.expert_dirs.push_back("expert-" + std::to_string(k));
    }
    m.router_dir = "router";
    REQUIRE(common::save_cluster_manifest(dir / "clusters.json", m).ok());
    return dir.path();
}

std::vector<SimVolunteer> volunteers(int count) {
    std::vector<SimVolunteer> fleet(static_cast<std::size_t>(count));
    for (int i = 0; i < count; ++i) fleet[static_cast<std::size_t>(i)].name = "v" + std::to_string(i);
    return fleet;
}

}  // namespace

TEST_CASE("the budget goes to the router's share and then by cluster size; the fleet by budget") {
    testing::TempDir dir;
    auto clusters = three_clusters(dir);
    std::vector<MemberRun> seen;
    auto runs = run_expert_members(clusters, "fedasync", "dit-nano", 10000, 0.1, volunteers(8),
                                   [&](const MemberRun& member) -> common::Result<RunResult> {
                                       seen.push_back(member);
                                       RunResult result;
                                       result.name = member.name;
                                       return result;
                                   });
    REQUIRE(runs.ok());
    REQUIRE(seen.size() == 4);
    CHECK(runs->back().name == "fedasync-router");
    std::vector<std::string> names{"fedasync-e0", "fedasync-e1", "fedasync-e2", "fedasync-router"};
    std::vector<std::int64_t> budgets{900, 2700, 5400, 1000};
    // Volunteers of one speed: one each, then each next to the member whose speed is the smallest
    // share of its budget (e2 twice, then e1 and e2 tie at 2 / 5400 = 1 / 2700: e1, then e2).
    std::vector<std::size_t> fleets{1, 2, 4, 1};
    std::set<std::string> everyone;
    for (std::size_t i = 0; i < seen.size(); ++i) {
        CHECK(seen[i].name == names[i]);
        CHECK(seen[i].budget == budgets[i]);
        CHECK(seen[i].fleet.size() == fleets[i]);
        CHECK(seen[i].model == (i < 3 ? "dit-nano" : "router"));
        CHECK(seen[i].data == clusters / (i < 3 ? "expert-" + std::to_string(i) : std::string("router")));
        for (const auto& v : seen[i].fleet) everyone.insert(v.name);
    }
    CHECK(everyone.size() == 8);  // each volunteer in one member
}

TEST_CASE("one cluster, too few volunteers or a failing member are refused by name") {
    auto never = [](const MemberRun&) -> common::Result<RunResult> { return common::make_error("not to be run"); };
    testing::TempDir one;
    CHECK(run_expert_members(three_clusters(one, 1), "fedasync", "dit-tiny", 1000, 0.1, volunteers(8), never)
              .error()
              .message.find("two or more clusters") != std::string::npos);
    testing::TempDir three;
    auto clusters = three_clusters(three);
    CHECK(run_expert_members(clusters, "fedasync", "dit-tiny", 1000, 0.1, volunteers(3), never)
              .error()
              .message.find("a volunteer per member") != std::string::npos);
    auto failed = run_expert_members(clusters, "fedasync", "dit-tiny", 1000, 0.1, volunteers(4), never);
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.error().message.find("fedasync-e0") != std::string::npos);
}

TEST_CASE("the fleet is split by speed: each member's speed in proportion to its budget") {
    testing::TempDir dir;
    auto clusters = three_clusters(dir);  // budgets 900, 2700, 5400 and the router's 1000
    auto fleet = volunteers(8);
    std::vector<double> speeds{1, 1, 1, 1, 8, 8, 8, 8};  // the fast ones last in fleet order
    for (std::size_t i = 0; i < fleet.size(); ++i) fleet[i].samples_per_s = speeds[i];
    std::map<std::string, MemberRun> seen;
    REQUIRE(run_expert_members(clusters, "fedasync", "dit-nano", 10000, 0.1, fleet,
                               [&](const MemberRun& member) -> common::Result<RunResult> {
                                   seen[member.name] = member;
                                   return RunResult{};
                               })
                .ok());
    auto seconds = [&](const std::string& name) {
        double speed = 0;
        for (const auto& v : seen.at(name).fleet) speed += v.samples_per_s;
        return static_cast<double>(seen.at(name).budget) / speed;
    };
    // Each member gets a fast volunteer (the largest budget the fastest); the four slow ones go
    // to the largest expert: 5400 / 12, 2700 / 8, 1000 / 8, 900 / 8 s.
    CHECK(seen.at("fedasync-e2").fleet.size() == 5);
    CHECK(seconds("fedasync-e2") == doctest::Approx(450));
    CHECK(seconds("fedasync-e1") == doctest::Approx(337.5));
    CHECK(seconds("fedasync-router") == doctest::Approx(125));
    CHECK(seconds("fedasync-e0") == doctest::Approx(112.5));
    // Split in fleet order by budget instead, e2 would get three slow volunteers: 1800 s.
    for (const auto& [name, member] : seen)
        for (std::size_t i = 1; i < member.fleet.size(); ++i)
            CHECK(member.fleet[i - 1].name < member.fleet[i].name);  // fleet order within a member
}
