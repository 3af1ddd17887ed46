// Fleet files, presets and their expansion into volunteers.
#include "fleet_spec.h"

#include <boost/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

#include "file_io.h"
#include "json_strict.h"

namespace tessera::bench {
namespace {

constexpr std::int64_t kMaxVolunteers = 100000;

struct AttackName {
    Attack attack;
    std::string_view name;
};
constexpr AttackName kAttackNames[] = {
    {Attack::None, "none"},
    {Attack::NaN, "nan"},
    {Attack::Scaled, "scaled"},
    {Attack::Noise, "noise"},
    {Attack::SignFlip, "sign_flip"},
    {Attack::Zero, "zero"},
    {Attack::Tiny, "tiny"},
    {Attack::Replay, "replay"},
    {Attack::Scaled3, "scaled_3"},
    {Attack::FewerSteps, "fewer_steps"},
    {Attack::OtherShards, "other_shards"},
    {Attack::StaleBase, "stale_base"},
    {Attack::Copy, "copy"},
    {Attack::OldReplay, "old_replay"},
    {Attack::NoClip, "no_clip"},
    {Attack::NoDrop, "no_drop"},
    {Attack::LyingChecker, "lying_checker"},
};

// Consumer GPU classes of the `home` preset, slowest first: share of the fleet and training
// throughput relative to an RTX 4090 (docs/fleet_simulator.md says where the ratios come from).
struct GpuClass {
    std::string_view name;
    double share;
    double relative_speed;
};
constexpr GpuClass kHomeClasses[] = {
    {"gtx1660", 0.20, 0.08}, {"rtx2060", 0.15, 0.16}, {"rtx3060", 0.25, 0.25},
    {"rtx3070", 0.20, 0.35}, {"rtx3090", 0.10, 0.62}, {"rtx4090", 0.10, 1.00},
};

// The hostile preset's attacks, dealt round-robin to its hostile volunteers.
constexpr Attack kHostileAttacks[] = {Attack::Noise,  Attack::SignFlip, Attack::Scaled, Attack::Tiny,
                                      Attack::Replay, Attack::NaN,      Attack::Zero};

// The class at quantile q of the home fleet's share distribution.
const GpuClass& home_class_at(double q) {
    double cumulative = 0;
    for (const auto& c : kHomeClasses) {
        cumulative += c.share;
        if (q < cumulative) return c;
    }
    return kHomeClasses[std::size(kHomeClasses) - 1];
}

// A number, or [min, max] for a range drawn per volunteer.
void read_range(common::JsonObjectReader& reader, std::string_view key, double& min, double& max) {
    if (!reader.has(key)) return;
    const auto* value = reader.field(key);
    auto in_range = [](double v) { return std::isfinite(v) && v > 0 && v <= 1e6; };
    if (value->is_number()) {
        min = max = value->to_number<double>();
    } else if (value->is_array() && value->as_array().size() == 2 && value->as_array()[0].is_number() &&
               value->as_array()[1].is_number()) {
        min = value->as_array()[0].to_number<double>();
        max = value->as_array()[1].to_number<double>();
    } else {
        reader.fail(reader.path_of(key) + ": expected a number of Mbit/s or [min, max]");
        return;
    }
    if (!in_range(min) || !in_range(max) || min > max)
        reader.fail(reader.path_of(key) + ": expected 0 < min ≤ max ≤ 1e6 Mbit/s");
}

common::Result<VolunteerGroup> parse_group(const boost::json::value& json, const std::string& path) {
    common::JsonObjectReader reader(json, path);
    VolunteerGroup group;
    group.name = reader.has("name") ? reader.string("name", 1, 64) : "volunteer";
    group.count = reader.integer("count", 1, kMaxVolunteers);
    group.samples_per_s = reader.number("samples_per_s", 1e-3, 1e9);
    read_range(reader, "down_mbit", group.down_mbit_min, group.down_mbit_max);
    read_range(reader, "up_mbit", group.up_mbit_min, group.up_mbit_max);
    if (reader.has("attack")) {
        auto name = reader.string("attack", 1, 32);
        if (auto attack = attack_from_name(name))
            group.attack = *attack;
        else if (!reader.failed())
            reader.fail(reader.path_of("attack") + ": unknown attack '" + name + "'");
    }
    if (reader.has("honest_units")) group.honest_units = reader.integer("honest_units", 0, 1000000);
    if (reader.has("churn")) {
        common::JsonObjectReader churn(*reader.field("churn"), reader.path_of("churn"));
        group.churn.mean_online_s = churn.number("mean_online_s", 1, 1e9);
        group.churn.mean_offline_s = churn.number("mean_offline_s", 0, 1e9);
        group.churn.never_return = churn.number("never_return", 0, 1);
        reader.absorb(churn.finish());
    }
    if (auto status = reader.finish(); !status) return status.error();
    return group;
}

double log_uniform(std::mt19937_64& rng, double min, double max) {
    if (min == max) return min;
    std::uniform_real_distribution<double> u(std::log(min), std::log(max));
    return std::exp(u(rng));
}

}  // namespace

std::string_view attack_name(Attack attack) {
    for (const auto& a : kAttackNames)
        if (a.attack == attack) return a.name;
    return "none";
}

std::optional<Attack> attack_from_name(std::string_view name) {
    for (const auto& a : kAttackNames)
        if (a.name == name) return a.attack;
    return std::nullopt;
}

common::Result<FleetSpec> parse_fleet(std::string_view json_text) {
    auto json = common::parse_json_strict(json_text);
    if (!json) return common::with_context("fleet", json.error());
    common::JsonObjectReader reader(*json, "fleet");
    FleetSpec spec;
    spec.name = reader.has("name") ? reader.string("name", 1, 64) : "fleet";
    if (reader.has("seed")) spec.seed = static_cast<std::uint64_t>(reader.integer("seed", 0, 9007199254740991));
    const auto* groups = reader.field("groups");
    if (groups && !groups->is_array()) reader.fail("fleet.groups: expected an array");
    if (auto status = reader.finish(); !status) return status.error();
    std::int64_t total = 0;
    for (std::size_t i = 0; i < groups->as_array().size(); ++i) {
        auto group = parse_group(groups->as_array()[i], "fleet.groups[" + std::to_string(i) + "]");
        if (!group) return group.error();
        total += group->count;
        spec.groups.push_back(std::move(*group));
    }
    if (spec.groups.empty()) return common::make_error("fleet.groups: a fleet needs at least one group");
    if (total > kMaxVolunteers) return common::make_error("fleet: more than 100000 volunteers");
    return spec;
}

common::Result<FleetSpec> load_fleet_file(const std::string& path) {
    auto bytes = common::read_file(path, common::JsonLimits{}.max_bytes);
    if (!bytes) return bytes.error();
    auto spec = parse_fleet(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()));
    if (!spec) return common::with_context(path, spec.error());
    return spec;
}


common::Result<FleetSpec> preset_fleet(std::string_view name, std::int64_t volunteers, double base_speed,
                                       std::uint64_t seed) {
    if (volunteers < 1 || volunteers > kMaxVolunteers) return common::make_error("volunteers must be in [1, 100000]");
    if (!(base_speed > 0)) return common::make_error("the base speed must be positive");
    FleetSpec spec;
    spec.name = std::string(name);
    spec.seed = seed;
    if (name == "uniform") {
        VolunteerGroup group;
        group.name = "uniform";
        group.count = volunteers;
        group.samples_per_s = base_speed * home_class_at(0.5).relative_speed;
        group.down_mbit_min = group.down_mbit_max = 100;
        group.up_mbit_min = group.up_mbit_max = 40;
        spec.groups.push_back(group);
        return spec;
    }
    if (name != "home" && name != "churn" && name != "hostile")
        return common::make_error("unknown fleet preset '" + std::string(name) + "' (uniform, home, churn, hostile)");
    // Volunteer i has the class at quantile (i + ½)/K, so K = 1 is the median volunteer and a
    // larger K samples the whole mix; consecutive volunteers of one kind form one group.
    std::size_t hostile_seen = 0;
    for (std::int64_t i = 0; i < volunteers; ++i) {
        const auto& gpu = home_class_at((static_cast<double>(i) + 0.5) / static_cast<double>(volunteers));
        VolunteerGroup group;
        group.name = std::string(gpu.name);
        group.samples_per_s = base_speed * gpu.relative_speed;
        group.down_mbit_min = 10, group.down_mbit_max = 500;
        group.up_mbit_min = 10, group.up_mbit_max = 100;
        if (name == "churn") group.churn = {1800, 900, 0.1};  // ~15 median units online, then away
        if (name == "hostile" && i % 4 == 3) {
            group.attack = kHostileAttacks[hostile_seen++ % std::size(kHostileAttacks)];
            group.name += "-" + std::string(attack_name(group.attack));
        }
        if (!spec.groups.empty() && spec.groups.back().name == group.name)
            ++spec.groups.back().count;
        else
            spec.groups.push_back(group);
    }
    return spec;
}

std::vector<SimVolunteer> expand_fleet(const FleetSpec& spec) {
    std::mt19937_64 rng(spec.seed);
    std::vector<SimVolunteer> fleet;
    std::map<std::string, int> seen;
    for (const auto& group : spec.groups)
        for (std::int64_t i = 0; i < group.count; ++i) {
            SimVolunteer v;
            v.group = group.name;
            v.name = group.name + "-" + std::to_string(seen[group.name]++);
            v.samples_per_s = group.samples_per_s;
            v.down_mbit = log_uniform(rng, group.down_mbit_min, group.down_mbit_max);
            v.up_mbit = log_uniform(rng, group.up_mbit_min, group.up_mbit_max);
            v.churn = group.churn;
            v.attack = group.attack;
            v.honest_units = group.honest_units;
            fleet.push_back(std::move(v));
        }
    return fleet;
}

double median_speed(const std::vector<SimVolunteer>& fleet) {
    std::vector<double> speeds;
    for (const auto& v : fleet) speeds.push_back(v.samples_per_s);
    if (speeds.empty()) return 0;
    std::sort(speeds.begin(), speeds.end());
    auto n = speeds.size();
    return n % 2 ? speeds[n / 2] : 0.5 * (speeds[n / 2 - 1] + speeds[n / 2]);
}

}  // namespace tessera::bench
