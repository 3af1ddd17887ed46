// Calibrations are kept as JSON in the settings table under "calibration/<task id>".
#include "calibration.h"

#include <boost/json.hpp>

#include "json_strict.h"

namespace tessera::server {
namespace {

std::string key_of(const std::string& task_id) { return "calibration/" + task_id; }

}  // namespace

common::Status save_calibration(SettingStore& store, const std::string& task_id, const Calibration& c) {
    boost::json::object json{
        {"norm_per_step", c.norm_per_step}, {"gain_per_step", c.gain_per_step}, {"steps", c.steps},
        {"first_gain_per_step", c.first_gain_per_step}};
    return store.set_setting(key_of(task_id), boost::json::serialize(json));
}

common::Result<std::optional<Calibration>> load_calibration(SettingStore& store, const std::string& task_id) {
    auto text = store.setting(key_of(task_id));
    if (!text) return text.error();
    if (!*text) return std::optional<Calibration>();
    auto json = common::parse_json_strict(**text);
    if (!json) return common::with_context("calibration of " + task_id, json.error());
    common::JsonObjectReader r(*json, "calibration");
    Calibration c;
    c.norm_per_step = r.number("norm_per_step", 0, 1e12);
    c.gain_per_step = r.number("gain_per_step", -1e12, 1e12);
    c.steps = r.integer("steps", 1, 1000000);
    // Calibrations stored before the second unit (2026-12-02) have one gain.
    if (r.has("first_gain_per_step")) c.first_gain_per_step = r.number("first_gain_per_step", -1e12, 1e12);
    if (auto status = r.finish(); !status) return status.error();
    return std::optional<Calibration>(c);
}

}  // namespace tessera::server
