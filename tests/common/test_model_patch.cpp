// Model patches: a chain reproduces the published model bit for bit on the receiving side,
// error feedback keeps the published model near the true one, and a bad patch is refused
// with a named error and changes nothing.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "checkpoint.h"
#include "model_patch.h"
#include "sha256.h"

using namespace tessera::common;

namespace {

NamedTensors random_model(std::mt19937& rng, float scale) {
    std::normal_distribution<float> normal(0.0f, scale);
    NamedTensors model{{"a.weight", {64, 40}, {}}, {"b.bias", {300}, {}}};
    for (auto& t : model) {
        t.values.resize(static_cast<std::size_t>(t.shape[0] * (t.shape.size() > 1 ? t.shape[1] : 1)));
        for (auto& v : t.values) v = normal(rng);
    }
    return model;
}

double norm(const NamedTensors& tensors) {
    double sum = 0;
    for (const auto& t : tensors)
        for (float v : t.values) sum += double(v) * double(v);
    return std::sqrt(sum);
}

double distance(const NamedTensors& a, const NamedTensors& b) {
    double sum = 0;
    for (std::size_t t = 0; t < a.size(); ++t)
        for (std::size_t i = 0; i < a[t].values.size(); ++i) {
            double d = double(a[t].values[i]) - double(b[t].values[i]);
            sum += d * d;
        }
    return std::sqrt(sum);
}

bool identical(const NamedTensors& a, const NamedTensors& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t t = 0; t < a.size(); ++t)
        if (a[t].values.size() != b[t].values.size() ||
            std::memcmp(a[t].values.data(), b[t].values.data(), a[t].values.size() * sizeof(float)) != 0)
            return false;
    return true;
}

}  // namespace

TEST_CASE("a chain of patches rebuilds the published model bit for bit; error feedback keeps it near the true one") {
    for (auto dtype : {DeltaDType::Int8, DeltaDType::Int4, DeltaDType::BF16}) {
        CAPTURE(delta_dtype_name(dtype));
        std::mt19937 rng(7);
        auto truth = random_model(rng, 1.0f);
        auto published = truth;  // version 0 is sent whole
        auto volunteer = truth;
        double step_norm = 0;
        std::int64_t patch_bytes = 0;
        for (int version = 1; version <= 30; ++version) {
            auto step = random_model(rng, 1e-3f);
            step_norm = norm(step);
            for (std::size_t t = 0; t < truth.size(); ++t)
                for (std::size_t i = 0; i < truth[t].values.size(); ++i) truth[t].values[i] += step[t].values[i];
            auto patch = make_patch(truth, published, {dtype, 1.0}).value();
            patch_bytes = static_cast<std::int64_t>(patch.size());
            REQUIRE(apply_patch(volunteer, patch).ok());
            REQUIRE(identical(volunteer, published));
        }
        // The same checkpoint bytes, so the work unit's hash confirms the volunteer's copy.
        CheckpointInfo info{"t", "dit-tiny", 30};
        CHECK(sha256_hex(write_checkpoint(volunteer, info).value()) ==
              sha256_hex(write_checkpoint(published, info).value()));
        // Error feedback: what one patch leaves out is sent by the next, so after 30 versions
        // the published model is within about one encoding error of one step of the truth.
        double lag = distance(truth, published) / step_norm;
        CHECK(lag < (dtype == DeltaDType::Int4 ? 0.3 : 0.02));
        CHECK(patch_bytes < static_cast<std::int64_t>(2860 * sizeof(float)));
    }
}

TEST_CASE("a corrupt, truncated or mis-shaped patch is refused with a named error and changes nothing") {
    std::mt19937 rng(3);
    auto truth = random_model(rng, 1.0f);
    auto published = truth;
    auto target = truth;
    target[0].values[5] += 0.01f;
    auto patch = make_patch(target, published, {DeltaDType::Int8, 1.0}).value();
    auto model = truth;

    auto corrupt = patch;
    corrupt[corrupt.size() / 2] ^= 0x5a;
    auto refused = apply_patch(model, corrupt);
    CHECK(!refused.ok());
    CHECK(refused.message().find("model patch") != std::string::npos);
    CHECK(identical(model, truth));

    Bytes truncated(patch.begin(), patch.begin() + static_cast<std::ptrdiff_t>(patch.size() / 3));
    CHECK(!apply_patch(model, truncated).ok());
    CHECK(identical(model, truth));

    auto other = random_model(rng, 1.0f);
    other[1].shape = {150, 2};  // same count of values, another shape
    auto other_published = other;
    auto other_target = other;
    other_target[1].values[0] += 1.0f;
    auto misfit = make_patch(other_target, other_published, {DeltaDType::Int8, 1.0}).value();
    auto wrong_shape = apply_patch(model, misfit);
    CHECK(!wrong_shape.ok());
    CHECK(wrong_shape.message().find("shape") != std::string::npos);
    CHECK(identical(model, truth));

    NamedTensors renamed = truth;
    renamed[1].name = "c.bias";
    CHECK(make_patch(renamed, published, {DeltaDType::Int8, 1.0}).message().find("c.bias") != std::string::npos);
}
