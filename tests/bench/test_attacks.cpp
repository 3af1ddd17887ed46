// Issue 56's attack classes in the fleet simulator: their names and fleet files, the honest
// streak before each attack, the units the wrong trainers train, and a short run in which each
// resending attack is returned and counted under its name.
#include <doctest/doctest.h>

#include "fleet_sim.h"
#include "fleet_spec.h"
#include "poison.h"
#include "small_fleet_settings.h"
#include "synthetic_dataset.h"
#include "task_setup.h"
#include "temp_dir.h"
#include "volunteer_uploads.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

// A dit-tiny task of small units on a synthetic dataset written into `dir`, nothing replicated.
server::TaskConfig small_task(const testing::TempDir& dir) {
    testing::write_synthetic_dataset(dir.path() / "data", 3);
    auto config = server::default_task_config(dir.path() / "data", server::PolicyKind::FedAsync, "dit-tiny").value();
    config.local_steps = 4;
    config.batch_size = 8;
    config.target_seconds = 0;
    config.replication = 0;
    config.eval_samples = 64;
    return config;
}

}  // namespace

TEST_CASE("the new attack classes parse by name, and honest_units spaces a volunteer's attacks") {
    for (const char* name : {"scaled_3", "fewer_steps", "other_shards", "stale_base", "copy", "old_replay", "no_clip",
                             "no_drop", "lying_checker"}) {
        auto attack = attack_from_name(name);
        REQUIRE_MESSAGE(attack.has_value(), name);
        CHECK(attack_name(*attack) == name);
    }
    auto spec = parse_fleet(R"({"groups": [{"count": 2, "samples_per_s": 5, "attack": "stale_base",
                                            "honest_units": 3}]})");
    REQUIRE_MESSAGE(spec.ok(), spec.message());
    auto fleet = expand_fleet(*spec);
    REQUIRE(fleet.size() == 2);
    CHECK(fleet[1].honest_units == 3);
    CHECK_FALSE(parse_fleet(R"({"groups": [{"count": 1, "samples_per_s": 5, "honest_units": -1}]})").ok());

    VolunteerState v;
    v.spec = fleet[0];
    std::vector<Attack> taken;
    for (int i = 0; i < 8; ++i) taken.push_back(v.next_attack());
    auto s = Attack::StaleBase, n = Attack::None;
    CHECK(taken == std::vector<Attack>{n, n, n, s, n, n, n, s});
    v.spec.honest_units = 0;  // every unit the attack
    CHECK(v.next_attack() == s);
}

TEST_CASE("the wrong trainers' units: half the steps, no clipping, no caption drop; the rest as given") {
    common::WorkUnit unit;
    unit.hyper.local_steps = 9;
    unit.hyper.grad_clip = 1.0;
    unit.hyper.caption_drop = 0.1;
    CHECK(misread_unit(unit, Attack::FewerSteps).hyper.local_steps == 4);
    CHECK(misread_unit(unit, Attack::NoClip).hyper.grad_clip == 0);
    CHECK(misread_unit(unit, Attack::NoDrop).hyper.caption_drop == 0.0);
    for (auto attack : {Attack::StaleBase, Attack::OtherShards, Attack::None}) {
        auto same = misread_unit(unit, attack);
        CHECK(same.hyper.local_steps == 9);
        CHECK(same.hyper.grad_clip == 1.0);
        CHECK(same.hyper.caption_drop == 0.1);
    }
    unit.hyper.local_steps = 1;
    CHECK(misread_unit(unit, Attack::FewerSteps).hyper.local_steps == 1);
    for (auto attack : {Attack::FewerSteps, Attack::OtherShards, Attack::StaleBase, Attack::NoClip, Attack::NoDrop})
        CHECK(attack_trains_wrongly(attack));
    for (auto attack : {Attack::Copy, Attack::OldReplay, Attack::Noise, Attack::None})
        CHECK_FALSE(attack_trains_wrongly(attack));
}

TEST_CASE("copies and old replays are sent after an honest streak, counted by attack; exact copies are refused") {
    testing::TempDir dir;
    auto config = small_task(dir);
    FleetSpec spec;
    spec.seed = 5;
    spec.groups = {{"gpu", 2, 20, 100, 100, 20, 20, {}, Attack::None, 0},
                   {"copier", 1, 20, 100, 100, 20, 20, {}, Attack::Copy, 2},
                   {"replayer", 1, 20, 100, 100, 20, 20, {}, Attack::OldReplay, 4}};
    auto settings = small_settings("fedasync", 960);  // about 7 units each
    settings.curve_points = 2;
    auto result = simulate_fleet(config, expand_fleet(spec), settings, dir.path() / "sim");
    REQUIRE_MESSAGE(result.ok(), result.message());
    // The copier's units 3, 6, … and the replayer's 5, 10, … are attacks; their others "cover",
    // the gpu volunteers' "none".
    REQUIRE(result->attacks["copy"].returned >= 1);
    CHECK(result->attacks["copy"].merged == 0);
    CHECK(result->attacks["copy"].refused["copied"] >= 1);
    REQUIRE(result->attacks["old_replay"].returned >= 1);
    CHECK(result->attacks["none"].merged >= 1);
    CHECK(result->attacks["cover"].returned >= 2);  // the copier's and the replayer's honest units
    std::int64_t hostile_units = 0;
    for (const auto& [attack, outcome] : result->attacks)
        hostile_units += attack == "none" || attack == "cover" ? 0 : outcome.returned;
    CHECK(hostile_units < result->attacks["none"].returned + result->attacks["cover"].returned);
}

TEST_CASE("a lying checker's answers are refused check_mismatch and quarantine it; no honest result is refused") {
    testing::TempDir dir;
    auto config = small_task(dir);
    config.loss_check = 1;
    config.check_by = "volunteers";
    config.trust_streak = 0;
    FleetSpec spec;
    spec.seed = 5;
    spec.groups = {{"gpu", 2, 20, 100, 100, 20, 20, {}, Attack::None, 0},
                   {"liar", 1, 20, 100, 100, 20, 20, {}, Attack::LyingChecker, 0}};
    auto result = simulate_fleet(config, expand_fleet(spec), small_settings("fedasync", 480), dir.path() / "sim");
    REQUIRE_MESSAGE(result.ok(), result.message());
    // Its first lie is caught and quarantines it: a quarantined volunteer is sent no more checks.
    CHECK(result->attacks["lying_checker"].returned >= 1);
    CHECK(result->attacks["lying_checker"].refused["check_mismatch"] == result->attacks["lying_checker"].returned);
    CHECK(result->attacks["loss_check"].returned >= 1);  // the honest volunteers' answers
    CHECK(result->attacks["loss_check"].refused.empty());
    CHECK(result->attacks["none"].refused.empty());
    CHECK(result->attacks["none"].merged >= 1);
}
