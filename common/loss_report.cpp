// JSON of a loss-check unit's answer (loss_report.h).
#include "loss_report.h"

#include <cmath>

#include <boost/json.hpp>

#include "json_strict.h"
#include "protocol.h"

namespace tessera::common {
namespace {

constexpr const char* kFields[] = {"held_out_before", "held_out_after", "own_before", "own_after"};

boost::json::array losses_to_json(const std::vector<double>& losses) {
    boost::json::array values;
    values.reserve(losses.size());
    for (double loss : losses) values.push_back(loss);
    return values;
}

std::vector<double> read_losses(JsonObjectReader& reader, std::string_view key) {
    std::vector<double> losses;
    const auto* json = reader.field(key);
    if (json == nullptr) return losses;
    const auto* array = json->if_array();
    if (array == nullptr || array->empty() || array->size() > static_cast<std::size_t>(kMaxCheckSamples)) {
        reader.fail("field \"" + std::string(key) + "\": expected an array of 1 to " +
                    std::to_string(kMaxCheckSamples) + " losses");
        return losses;
    }
    losses.reserve(array->size());
    for (std::size_t i = 0; i < array->size(); ++i) {
        const auto& value = (*array)[i];
        double loss = value.is_double()   ? value.get_double()
                      : value.is_int64()  ? static_cast<double>(value.get_int64())
                      : value.is_uint64() ? static_cast<double>(value.get_uint64())
                                          : -1;
        if (!std::isfinite(loss) || loss < 0) {
            reader.fail("field \"" + std::string(key) + "\"[" + std::to_string(i) +
                        "]: expected a finite loss, 0 or more");
            return losses;
        }
        losses.push_back(loss);
    }
    return losses;
}

}  // namespace

boost::json::value to_json(const LossReport& r) {
    return boost::json::object{{kFields[0], losses_to_json(r.held_out_before)},
                               {kFields[1], losses_to_json(r.held_out_after)},
                               {kFields[2], losses_to_json(r.own_before)},
                               {kFields[3], losses_to_json(r.own_after)}};
}

Result<LossReport> loss_report_from_json(const boost::json::value& json) {
    JsonObjectReader reader(json, "loss_report");
    LossReport r;
    r.held_out_before = read_losses(reader, kFields[0]);
    r.held_out_after = read_losses(reader, kFields[1]);
    r.own_before = read_losses(reader, kFields[2]);
    r.own_after = read_losses(reader, kFields[3]);
    if (!reader.failed() && r.held_out_before.size() != r.held_out_after.size())
        reader.fail("fields \"held_out_before\" and \"held_out_after\": expected as many losses each");
    if (!reader.failed() && r.own_before.size() != r.own_after.size())
        reader.fail("fields \"own_before\" and \"own_after\": expected as many losses each");
    if (auto status = reader.finish(); !status) return status.error();
    return r;
}

std::string loss_report_bytes(const LossReport& report) { return boost::json::serialize(to_json(report)); }

Result<LossReport> parse_loss_report(std::string_view bytes) {
    auto json = parse_json_strict(bytes);
    if (!json) return json.error();
    return loss_report_from_json(*json);
}

}  // namespace tessera::common
