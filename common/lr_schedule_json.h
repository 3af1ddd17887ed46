// The JSON form of a run-wide learning-rate schedule (lr_schedule.h), shared by the work
// unit's `hyper.schedule` and the task configuration's `lr_schedule`:
// {kind: "constant"|"cosine", warmup_samples, total_samples, final_lr_ratio}, every field
// required, the values checked by validate_lr_schedule.
#pragma once

#include <boost/json/object.hpp>

#include <string_view>

#include "json_strict.h"
#include "lr_schedule.h"

namespace tessera::common {

boost::json::object lr_schedule_to_json(const LrSchedule& schedule);

// The object at `key` of `parent`; an error (missing, ill-typed, invalid) is recorded in
// `parent` and a default schedule returned.
LrSchedule read_lr_schedule(JsonObjectReader& parent, std::string_view key);

}  // namespace tessera::common
