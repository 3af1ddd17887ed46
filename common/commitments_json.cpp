// JSON of a result's commitments (commitments_json.h).
#include "commitments_json.h"

#include <cmath>

#include "protocol.h"
#include "protocol_fields.h"

namespace tessera::common {
namespace {

constexpr double kLargest = 1e30;  // numbers beyond are no training's

boost::json::array sketch_to_json(const CommitmentSketch& sketch) {
    boost::json::array values;
    for (double v : sketch) values.push_back(v);
    return values;
}

CommitmentSketch read_sketch(JsonObjectReader& reader, std::string_view key) {
    CommitmentSketch sketch{};
    const auto* json = reader.field(key);
    if (json == nullptr) return sketch;
    const auto* array = json->if_array();
    bool valid = array != nullptr && array->size() == kCommitmentBuckets;
    for (std::size_t i = 0; valid && i < kCommitmentBuckets; ++i) {
        const auto& v = (*array)[i];
        valid = v.is_number() && std::abs(v.to_number<double>()) <= kLargest;
        if (valid) sketch[i] = v.to_number<double>();
    }
    if (!valid)
        reader.fail("field \"" + std::string(key) + "\": expected " + std::to_string(kCommitmentBuckets) +
                    " finite numbers");
    return sketch;
}

ResidualCommitment read_residual(JsonObjectReader& parent, std::string_view key) {
    ResidualCommitment residual;
    const auto* json = parent.field(key);
    if (json == nullptr) return residual;
    JsonObjectReader reader(*json, parent.path_of(key));
    if (!reader.has("sha256")) reader.fail("missing field \"sha256\"");
    residual.sha256 = protocol_fields::read_optional_sha256(reader, "sha256");
    residual.sketch = read_sketch(reader, "sketch");
    if (!reader.failed() && residual.sha256.empty() && residual.sketch != CommitmentSketch{})
        reader.fail("a residual without a hash has a sketch of zeros");
    parent.absorb(reader.finish());
    return residual;
}

MomentsCommitment read_moments(JsonObjectReader& parent, std::string_view key) {
    MomentsCommitment moments;
    JsonObjectReader reader(*parent.field(key), parent.path_of(key));
    if (!reader.has("sha256")) reader.fail("missing field \"sha256\"");
    moments.sha256 = protocol_fields::read_optional_sha256(reader, "sha256");
    moments.steps = reader.integer("steps", 0, kMaxSafeInteger);
    if (!reader.failed() && moments.sha256.empty() != (moments.steps == 0))
        reader.fail("zero moments have no hash and 0 steps; resumed ones both");
    parent.absorb(reader.finish());
    return moments;
}

CommitmentSegment read_segment(const boost::json::value& json, const std::string& path, JsonObjectReader& parent) {
    JsonObjectReader reader(json, path);
    CommitmentSegment segment;
    segment.step = reader.integer("step", 1, kMaxSafeInteger);
    segment.loss = reader.number("loss", -kLargest, kLargest);
    segment.norm = reader.number("norm", 0.0, kLargest);
    segment.sketch = read_sketch(reader, "sketch");
    parent.absorb(reader.finish());
    return segment;
}

std::vector<CommitmentSegment> read_segments(JsonObjectReader& reader) {
    std::vector<CommitmentSegment> segments;
    const auto* json = reader.field("segments");
    if (json == nullptr) return segments;
    const auto* array = json->if_array();
    if (array == nullptr || array->empty() || array->size() > kMaxCommitmentSegments) {
        reader.fail("field \"segments\": expected an array of 1 to " + std::to_string(kMaxCommitmentSegments) +
                    " segments");
        return segments;
    }
    for (std::size_t i = 0; i < array->size() && !reader.failed(); ++i) {
        segments.push_back(
            read_segment((*array)[i], reader.path_of("segments") + "[" + std::to_string(i) + "]", reader));
        if (i > 0 && !reader.failed() && segments[i].step <= segments[i - 1].step)
            reader.fail("field \"segments\": steps must rise");
    }
    return segments;
}

}  // namespace

boost::json::object commitments_to_json(const Commitments& c) {
    boost::json::array segments;
    for (const auto& s : c.segments)
        segments.push_back(
            {{"step", s.step}, {"loss", s.loss}, {"norm", s.norm}, {"sketch", sketch_to_json(s.sketch)}});
    auto residual = [](const ResidualCommitment& r) {
        return boost::json::object{{"sha256", r.sha256}, {"sketch", sketch_to_json(r.sketch)}};
    };
    boost::json::object json{{"every", c.every},
                             {"segments", std::move(segments)},
                             {"residual_in", residual(c.residual_in)},
                             {"residual_out", residual(c.residual_out)}};
    if (c.moments_in) json["moments_in"] = {{"sha256", c.moments_in->sha256}, {"steps", c.moments_in->steps}};
    return json;
}

Commitments read_commitments(JsonObjectReader& parent, std::string_view key) {
    Commitments commitments;
    const auto* json = parent.field(key);
    if (json == nullptr) return commitments;
    JsonObjectReader reader(*json, parent.path_of(key));
    commitments.every = reader.integer("every", 1, kMaxSafeInteger);
    commitments.segments = read_segments(reader);
    commitments.residual_in = read_residual(reader, "residual_in");
    commitments.residual_out = read_residual(reader, "residual_out");
    if (reader.has("moments_in")) commitments.moments_in = read_moments(reader, "moments_in");
    parent.absorb(reader.finish());
    return commitments;
}

Result<Commitments> parse_commitments(std::string_view text) {
    auto json = parse_json_strict(text);
    if (!json) return with_context("commitments", json.error());
    boost::json::value wrapper = {{"commitments", std::move(*json)}};
    JsonObjectReader reader(wrapper, "stored");
    auto commitments = read_commitments(reader, "commitments");
    if (auto status = reader.finish(); !status) return status.error();
    return commitments;
}

}  // namespace tessera::common
