// A result's commitments: the segments' steps, the residuals' hashes, the JSON form and the
// upload identity sketch(upload) = sketch_last + sketch(r_in) − sketch(r_out) under each codec,
// with error feedback, a forged last segment refused; the resumed moments' hash and the
// comparison of a replay audit with the committed trajectory.
#include <doctest/doctest.h>

#include <boost/json.hpp>

#include <random>

#include "commitments.h"
#include "commitments_json.h"
#include "protocol.h"
#include "sha256.h"
#include "text_encoding.h"

using namespace tessera::common;

namespace {

NamedTensors gaussian(std::uint64_t seed, float scale) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gauss(0.0f, scale);
    // Sorted by name, as decoded deltas are.
    NamedTensors tensors{{"blocks.0.bias", {32}, {}}, {"blocks.0.weight", {24, 32}, {}}, {"head.weight", {700}, {}}};
    for (auto& t : tensors) {
        std::int64_t count = 1;
        for (auto d : t.shape) count *= d;
        t.values.resize(static_cast<std::size_t>(count));
        for (auto& v : t.values) v = gauss(rng);
    }
    return tensors;
}

NamedTensors plus(NamedTensors a, const NamedTensors& b, float scale = 1.0f) {
    for (std::size_t t = 0; t < a.size(); ++t)
        for (std::size_t i = 0; i < a[t].values.size(); ++i) a[t].values[i] += scale * b[t].values[i];
    return a;
}

// What a volunteer sends for a trained Δ: Δ + r_in encoded; the commitments of a unit of
// `steps` steps whose last segment is Δ (earlier segments: fractions of it).
struct Sent {
    NamedTensors upload;
    Commitments commitments;
};

Sent send(const NamedTensors& delta, const NamedTensors& r_in, const DeltaEncoding& encoding, std::int64_t steps,
          std::uint64_t seed) {
    auto input = r_in.empty() ? delta : plus(delta, r_in);
    auto encoded = encode_delta(input, encoding);
    REQUIRE(encoded);
    auto decoded = decode_delta(encoded->bytes);
    REQUIRE(decoded);
    auto r_out = plus(input, decoded->tensors, -1.0f);
    Commitments c;
    c.every = commitment_every(steps);
    for (auto step : commitment_steps(steps)) {
        auto part = delta;
        for (auto& t : part)
            for (auto& v : t.values) v *= static_cast<float>(step) / static_cast<float>(steps);
        c.segments.push_back({step, 1.0, 0.0, commitment_sketch(part, seed)});
    }
    c.residual_in = residual_commitment(r_in, seed);
    c.residual_out = residual_commitment(r_out, seed);
    return {decoded->tensors, c};
}

}  // namespace

TEST_CASE("segments end every ⌈steps / 8⌉ steps and at the last, never more than eight") {
    CHECK(commitment_steps(1) == std::vector<std::int64_t>{1});
    CHECK(commitment_steps(5) == std::vector<std::int64_t>{1, 2, 3, 4, 5});
    CHECK(commitment_steps(9) == std::vector<std::int64_t>{2, 4, 6, 8, 9});
    CHECK(commitment_steps(100) == std::vector<std::int64_t>{13, 26, 39, 52, 65, 78, 91, 100});
    for (std::int64_t steps = 1; steps < 300; ++steps) {
        auto ends = commitment_steps(steps);
        CHECK(ends.size() <= kMaxCommitmentSegments);
        CHECK(ends.back() == steps);
    }
}

TEST_CASE("a residual's hash is SHA-256 of its f32 values in name order") {
    NamedTensors residual{{"z", {1}, {2.0f}}, {"a", {2}, {1.0f, -0.5f}}};
    const float in_name_order[] = {1.0f, -0.5f, 2.0f};
    CHECK(residual_sha256(residual) ==
          sha256_hex({reinterpret_cast<const std::uint8_t*>(in_name_order), sizeof in_name_order}));
    CHECK(residual_sha256({}).empty());
    CHECK(residual_commitment({}, 3).sketch == CommitmentSketch{});
}

TEST_CASE("an honest upload keeps the identity under every codec, with and without error feedback") {
    const std::uint64_t seed = 99;
    auto delta = gaussian(1, 0.01f);
    const DeltaEncoding codecs[] = {{DeltaDType::F32, 1.0},  {DeltaDType::BF16, 1.0}, {DeltaDType::Int8, 1.0},
                                    {DeltaDType::Int4, 1.0}, {DeltaDType::Int2, 1.0}, {DeltaDType::Int8, 0.1},
                                    {DeltaDType::F32, 0.05}, {DeltaDType::Int4, 0.25}};
    for (const auto& codec : codecs) {
        CAPTURE(delta_dtype_name(codec.dtype));
        CAPTURE(codec.topk_fraction);
        auto alone = send(delta, {}, codec, 20, seed);
        CHECK(commitments_mismatch(alone.commitments, alone.upload, 20, seed).empty());
        // The residual carried in is the last unit's r_out: about as large as a delta.
        auto carried = send(delta, gaussian(2, 0.01f), codec, 20, seed);
        CHECK(commitments_mismatch(carried.commitments, carried.upload, 20, seed).empty());
    }
}

TEST_CASE("a forged last segment, a hidden residual, other steps or another key are refused") {
    const std::uint64_t seed = 7;
    auto delta = gaussian(3, 0.01f);
    auto sent = send(delta, gaussian(4, 0.01f), {DeltaDType::Int8, 0.25}, 12, seed);
    REQUIRE(commitments_mismatch(sent.commitments, sent.upload, 12, seed).empty());

    auto forged = sent.commitments;  // the trajectory of another delta
    forged.segments.back().sketch = commitment_sketch(gaussian(5, 0.01f), seed);
    CHECK(commitments_mismatch(forged, sent.upload, 12, seed).find("sketch lies") != std::string::npos);
    auto hidden = sent.commitments;  // the carried residual left out of the account
    hidden.residual_in = {};
    CHECK_FALSE(commitments_mismatch(hidden, sent.upload, 12, seed).empty());
    // 1 % noise added to the upload after committing.
    auto noisy = plus(sent.upload, gaussian(6, 0.0001f));
    CHECK_FALSE(commitments_mismatch(sent.commitments, noisy, 12, seed).empty());
    CHECK(commitments_mismatch(sent.commitments, sent.upload, 17, seed).find("every") != std::string::npos);
    CHECK(commitments_mismatch(sent.commitments, sent.upload, 11, seed).find("steps") != std::string::npos);
    CHECK_FALSE(commitments_mismatch(sent.commitments, sent.upload, 12, seed + 1).empty());
}

TEST_CASE("commitments read back from their JSON; bad ones are refused by name") {
    auto sent = send(gaussian(8, 0.01f), gaussian(9, 0.01f), {DeltaDType::Int4, 1.0}, 20, 5);
    auto text = boost::json::serialize(commitments_to_json(sent.commitments));
    auto back = parse_commitments(text);
    REQUIRE(back);
    CHECK(back->every == sent.commitments.every);
    REQUIRE(back->segments.size() == sent.commitments.segments.size());
    // Boost.JSON 1.81 reads a double to within an ulp of what it wrote: far inside the tolerance.
    auto near = [](const CommitmentSketch& a, const CommitmentSketch& b) {
        return sketches_agree(a, b, 1e-14, sketch_length(b));
    };
    CHECK(near(back->segments.back().sketch, sent.commitments.segments.back().sketch));
    CHECK(back->residual_in.sha256 == sent.commitments.residual_in.sha256);
    CHECK(near(back->residual_out.sketch, sent.commitments.residual_out.sketch));

    auto refusal = [&](auto mutate) {
        auto json = commitments_to_json(sent.commitments);
        mutate(json);
        auto parsed = parse_commitments(boost::json::serialize(json));
        return parsed ? std::string() : parsed.message();
    };
    CHECK(refusal([](auto& j) { j["segments"].as_array()[1].as_object()["step"] = 1; }).find("rise") !=
          std::string::npos);
    CHECK(refusal([](auto& j) { j["residual_in"].as_object()["sha256"] = ""; }).find("zeros") != std::string::npos);
    CHECK(refusal([](auto& j) {
              j["segments"].as_array()[0].as_object()["sketch"].as_array().pop_back();
          }).find("16 finite numbers") != std::string::npos);
    CHECK(refusal([](auto& j) { j.erase("residual_out"); }).find("residual_out") != std::string::npos);
    CHECK_FALSE(static_cast<bool>(parse_commitments("{\"every\": 1")));
}

TEST_CASE("a manifest carries its commitments when it has them and reads back without when not") {
    ResultManifest m;
    m.wu_id = "wu-1";
    m.client_id = "c-1";
    m.delta_blob = {std::string(64, 'd'), 10};
    m.device = "cpu";
    auto plain = boost::json::serialize(to_json(m));
    CHECK(plain.find("commitments") == std::string::npos);
    auto read = parse_message<ResultManifest>(plain);
    REQUIRE(read);
    CHECK_FALSE(read->commitments.has_value());
    m.commitments = send(gaussian(10, 0.01f), {}, {DeltaDType::F32, 1.0}, 4, 1).commitments;
    auto committed = parse_message<ResultManifest>(boost::json::serialize(to_json(m)));
    REQUIRE(committed);
    REQUIRE(committed->commitments.has_value());
    CHECK(committed->commitments->segments.size() == 4);
    CHECK(committed->commitments->residual_in.sha256.empty());
}

TEST_CASE("the moments a unit resumed: hashed first moments then second, stated in the JSON or absent") {
    NamedTensors m{{"z", {1}, {2.0f}}, {"a", {1}, {1.0f}}}, v{{"a", {1}, {4.0f}}, {"z", {1}, {3.0f}}};
    const float in_order[] = {1.0f, 2.0f, 4.0f, 3.0f};  // m by name, then v by name
    CHECK(moments_sha256(m, v) == sha256_hex({reinterpret_cast<const std::uint8_t*>(in_order), sizeof in_order}));
    CHECK(moments_sha256(v, m) != moments_sha256(m, v));
    CHECK(moments_sha256({}, {}).empty());

    auto c = send(gaussian(11, 0.01f), {}, {DeltaDType::F32, 1.0}, 4, 1).commitments;
    CHECK(boost::json::serialize(commitments_to_json(c)).find("moments_in") == std::string::npos);
    CHECK_FALSE(parse_commitments(boost::json::serialize(commitments_to_json(c)))->moments_in.has_value());
    c.moments_in = MomentsCommitment{moments_sha256(m, v), 17};
    auto back = parse_commitments(boost::json::serialize(commitments_to_json(c)));
    REQUIRE(back);
    REQUIRE(back->moments_in.has_value());
    CHECK(*back->moments_in == *c.moments_in);
    c.moments_in = MomentsCommitment{};  // zero moments
    CHECK(parse_commitments(boost::json::serialize(commitments_to_json(c)))->moments_in == MomentsCommitment{});

    auto refusal = [&](MomentsCommitment moments) {
        c.moments_in = moments;
        auto parsed = parse_commitments(boost::json::serialize(commitments_to_json(c)));
        return parsed ? std::string() : parsed.message();
    };
    CHECK(refusal({std::string(64, 'c'), 0}).find("zero moments") != std::string::npos);
    CHECK(refusal({"", 3}).find("zero moments") != std::string::npos);
    CHECK(refusal({"ABC", 3}).find("moments_in") != std::string::npos);
}

TEST_CASE("a replay agrees segment by segment within the tolerance, and names the first that does not") {
    auto delta = gaussian(12, 0.01f);
    auto claimed = send(delta, {}, {DeltaDType::F32, 1.0}, 20, 3).commitments;
    for (auto& s : claimed.segments) s.norm = 0.01 * static_cast<double>(s.step);
    CHECK(trajectory_mismatch(claimed, claimed, 1e-3).empty());

    auto replayed = claimed;
    replayed.segments[2].loss *= 1.0005;  // within 1e-3
    CHECK(trajectory_mismatch(claimed, replayed, 1e-3).empty());
    replayed.segments[2].loss *= 1.01;
    auto loss = trajectory_mismatch(claimed, replayed, 1e-3);
    CHECK(loss.find("ending at step " + std::to_string(claimed.segments[2].step)) != std::string::npos);
    CHECK(loss.find("loss") != std::string::npos);

    replayed = claimed;
    replayed.segments[4].norm *= 1.1;
    CHECK(trajectory_mismatch(claimed, replayed, 1e-3).find("‖θ − θ_0‖") != std::string::npos);
    // Another trajectory of the same norms: only the sketches tell.
    replayed = send(gaussian(13, 0.01f), {}, {DeltaDType::F32, 1.0}, 20, 3).commitments;
    for (std::size_t i = 0; i < replayed.segments.size(); ++i) {
        replayed.segments[i].norm = claimed.segments[i].norm;
        replayed.segments[i].loss = claimed.segments[i].loss;
    }
    CHECK(trajectory_mismatch(claimed, replayed, 1e-3).find("sketch") != std::string::npos);
    replayed.segments.pop_back();
    CHECK(trajectory_mismatch(claimed, replayed, 1e-3).find("segments committed") != std::string::npos);
}
