// A loss-check unit's answer (docs/protocol.md, "Loss-check units"): the per-sample losses it
// measured, uploaded as the result file of its unit. Strict JSON: four arrays of the same
// length, 1 to kMaxCheckSamples finite losses each, none negative.
#pragma once

#include <boost/json/value.hpp>

#include <string_view>
#include <vector>

#include "result.h"

namespace tessera::common {

struct LossReport {
    // The check's held-out rows, before and after the checked delta.
    std::vector<double> held_out_before;
    std::vector<double> held_out_after;
    // The checked unit's own rows (the last of its first epoch), before and after.
    std::vector<double> own_before;
    std::vector<double> own_after;
};

boost::json::value to_json(const LossReport& report);
Result<LossReport> loss_report_from_json(const boost::json::value& json);
// The report as uploaded (its JSON text), and read back from those bytes.
std::string loss_report_bytes(const LossReport& report);
Result<LossReport> parse_loss_report(std::string_view bytes);

}  // namespace tessera::common
