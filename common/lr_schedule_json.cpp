// JSON of a learning-rate schedule (lr_schedule_json.h).
#include "lr_schedule_json.h"

#include "protocol.h"

namespace tessera::common {

boost::json::object lr_schedule_to_json(const LrSchedule& s) {
    return {{"kind", lr_schedule_kind_name(s.kind)},
            {"warmup_samples", s.warmup_samples},
            {"total_samples", s.total_samples},
            {"final_lr_ratio", s.final_lr_ratio}};
}

LrSchedule read_lr_schedule(JsonObjectReader& parent, std::string_view key) {
    LrSchedule schedule;
    const auto* json = parent.field(key);
    if (json == nullptr) return schedule;
    JsonObjectReader reader(*json, parent.path_of(key));
    auto kind = reader.one_of("kind", {"constant", "cosine"});
    schedule.warmup_samples = reader.integer("warmup_samples", 0, kMaxSafeInteger);
    schedule.total_samples = reader.integer("total_samples", 0, kMaxSafeInteger);
    schedule.final_lr_ratio = reader.number("final_lr_ratio", 0.0, 1.0);
    if (!reader.failed()) {
        schedule.kind = *lr_schedule_kind_from_name(kind);
        if (auto status = validate_lr_schedule(schedule); !status) reader.fail(status.message());
    }
    parent.absorb(reader.finish());
    return schedule;
}

}  // namespace tessera::common
