// A simulated fleet of volunteers (docs/fleet_simulator.md): groups of volunteers with a
// training speed, home links, churn and hostility, read from a small JSON file
// (schemas/fleet.schema.json) or made from a preset, then expanded deterministically (for a
// seed) into one entry per volunteer. No torch, no server: plain data.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "result.h"

namespace tessera::bench {

// What a hostile volunteer returns instead of its honest delta.
enum class Attack {
    None,
    NaN,       // one value NaN
    Scaled,    // the honest delta × 10
    Noise,     // Gaussian noise with the honest delta's norm
    SignFlip,  // −(the honest delta)
    Zero,      // all zeros
    Tiny,      // all values 1e-30 (a free rider that dodges the zero check)
    Replay,    // the model's last published update, uploaded without training
    // Issue 56's classes: each a delta an honest-looking volunteer could send.
    Scaled3,      // the honest delta × 3 (inside the norm bound)
    FewerSteps,   // trained for half the unit's steps, reported as all of them
    OtherShards,  // trained on a shard the unit did not assign
    StaleBase,    // trained from the model kStaleVersions versions before the unit's base
    Copy,         // another volunteer's newest upload, sent as its own
    OldReplay,    // its own delta of kReplayAge units before, sent again
    NoClip,       // trained without gradient clipping (a subtly wrong implementation)
    NoDrop,       // trained without dropping captions or labels for guidance (text tasks)
    // A checker that passes whatever it is sent: its loss-check units' reports say every loss fell
    // by a tenth (docs/operations.md, "Loss-check units"); it trains honestly.
    LyingChecker,
};
constexpr std::int64_t kStaleVersions = 16;
constexpr std::int64_t kReplayAge = 4;
std::string_view attack_name(Attack attack);
std::optional<Attack> attack_from_name(std::string_view name);
// How a unit is counted: by its attack, and an honest unit of a hostile volunteer (one of the
// honest units between its attacks) as "cover", apart from honest volunteers' ("none").
constexpr std::string_view kCoverUnit = "cover";
// The label of an honest loss-check unit's assignment in the run's accounting (it is neither
// training nor an attack); a lying checker's are labelled by its attack.
inline constexpr std::string_view kLossCheckLabel = "loss_check";

inline std::string unit_label(Attack attack, Attack volunteers_attack) {
    return std::string(attack == Attack::None && volunteers_attack != Attack::None ? kCoverUnit : attack_name(attack));
}

// Volunteers come and go: online for an exponential time (mean online_s), then offline
// (mean offline_s); after each departure a volunteer never comes back with chance `never_return`.
// A volunteer that leaves mid-unit never uploads it.
struct Churn {
    double mean_online_s = 0;  // 0: never leaves
    double mean_offline_s = 0;
    double never_return = 0;
};

struct VolunteerGroup {
    std::string name;  // e.g. the GPU class, "rtx3060"
    std::int64_t count = 1;
    double samples_per_s = 1000;                      // training speed on the task's model
    double down_mbit_min = 100, down_mbit_max = 100;  // each volunteer's link, drawn log-uniformly
    double up_mbit_min = 20, up_mbit_max = 20;
    Churn churn;
    Attack attack = Attack::None;
    // A hostile group's volunteers compute this many units honestly before each attack, so that
    // each bad unit comes after a valid streak (which earns trust: fewer loss checks and
    // replicas); 0: every unit is the attack.
    std::int64_t honest_units = 0;
};

struct FleetSpec {
    std::string name;
    std::uint64_t seed = 1;
    std::vector<VolunteerGroup> groups;
};

// One volunteer of an expanded fleet.
struct SimVolunteer {
    std::string name;  // "<group>-<index>"
    std::string group;
    double samples_per_s = 0;
    double down_mbit = 0;
    double up_mbit = 0;
    Churn churn;
    Attack attack = Attack::None;
    std::int64_t honest_units = 0;
};

// Named errors for a bad file ("fleet.groups[2].samples_per_s: ...").
common::Result<FleetSpec> parse_fleet(std::string_view json_text);
common::Result<FleetSpec> load_fleet_file(const std::string& path);

// Presets for `volunteers` volunteers: "uniform", "home", "churn", "hostile" (25 % hostile).
// `base_speed` is the samples/s of the fastest home class (the uniform fleet runs at the
// home fleet's median).
common::Result<FleetSpec> preset_fleet(std::string_view name, std::int64_t volunteers, double base_speed,
                                       std::uint64_t seed);

// One entry per volunteer, links drawn from the seed: the same spec gives the same fleet.
std::vector<SimVolunteer> expand_fleet(const FleetSpec& spec);

// The median training speed of a fleet (the central baseline's clock runs at it).
double median_speed(const std::vector<SimVolunteer>& fleet);

}  // namespace tessera::bench
