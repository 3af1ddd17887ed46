// A result's commitments: their segment steps, the residuals' hashes and the upload identity.
#include "commitments.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

#include "plain_number.h"
#include "sha256.h"
#include "text_encoding.h"

namespace tessera::common {
namespace {

double norm_of(const NamedTensors& tensors) {
    double sum = 0;
    for (const auto& t : tensors)
        for (float v : t.values) sum += static_cast<double>(v) * v;
    return std::sqrt(sum);
}

std::string sketch_steps_text(const std::vector<CommitmentSegment>& segments) {
    std::string text;
    for (const auto& s : segments) text += (text.empty() ? "" : ", ") + std::to_string(s.step);
    return text;
}

// Adds the values, f32 little-endian, tensors in name order.
void hash_values(Sha256& hash, const NamedTensors& tensors) {
    std::vector<std::size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::sort(order.begin(), order.end(), [&](auto a, auto b) { return tensors[a].name < tensors[b].name; });
    static_assert(std::endian::native == std::endian::little, "the hash reads f32 values as stored");
    for (auto t : order) {
        const auto& values = tensors[t].values;
        hash.update({reinterpret_cast<const std::uint8_t*>(values.data()), values.size() * sizeof(float)});
    }
}

}  // namespace

std::int64_t commitment_every(std::int64_t steps) {
    auto segments = static_cast<std::int64_t>(kMaxCommitmentSegments);
    return std::max<std::int64_t>(1, (steps + segments - 1) / segments);
}

std::vector<std::int64_t> commitment_steps(std::int64_t steps) {
    std::vector<std::int64_t> ends;
    auto every = commitment_every(steps);
    for (std::int64_t s = every; s < steps; s += every) ends.push_back(s);
    if (steps > 0) ends.push_back(steps);
    return ends;
}

std::string residual_sha256(const NamedTensors& residual) {
    if (residual.empty()) return {};
    Sha256 hash;
    hash_values(hash, residual);
    return to_hex(hash.finish());
}

std::string moments_sha256(const NamedTensors& exp_avg, const NamedTensors& exp_avg_sq) {
    if (exp_avg.empty() && exp_avg_sq.empty()) return {};
    Sha256 hash;
    hash_values(hash, exp_avg);
    hash_values(hash, exp_avg_sq);
    return to_hex(hash.finish());
}

ResidualCommitment residual_commitment(const NamedTensors& residual, std::uint64_t seed) {
    if (residual.empty()) return {};
    return {residual_sha256(residual), commitment_sketch(residual, seed)};
}

std::string commitments_mismatch(const Commitments& commitments, const NamedTensors& upload, std::int64_t steps,
                                 std::uint64_t seed) {
    if (commitments.every != commitment_every(steps))
        return "every " + std::to_string(commitments.every) + " steps; a unit of " + std::to_string(steps) +
               " steps commits every " + std::to_string(commitment_every(steps));
    auto expected = commitment_steps(steps);
    bool same_steps = commitments.segments.size() == expected.size();
    for (std::size_t i = 0; same_steps && i < expected.size(); ++i)
        same_steps = commitments.segments[i].step == expected[i];
    if (!same_steps) return "segments end at steps " + sketch_steps_text(commitments.segments) + ", not as specified";
    const auto& last = commitments.segments.back();
    const auto& in = commitments.residual_in.sketch;
    const auto& out = commitments.residual_out.sketch;
    auto committed = add_sketches(add_sketches(last.sketch, in), out, -1.0);
    auto sent = commitment_sketch(upload, seed);
    double scale = norm_of(upload) + last.norm + sketch_length(in) + sketch_length(out);
    if (!sketches_agree(sent, committed, kCommitmentTolerance, scale)) {
        auto apart = sketch_length(add_sketches(sent, committed, -1.0));
        return "the delta's sketch lies " + std::to_string(apart / std::max(scale, 1e-30)) +
               " (relative) from its commitments' last segment and residuals";
    }
    return {};
}

namespace {

bool close(double a, double b, double tolerance) {
    return std::abs(a - b) <= tolerance * std::max({std::abs(a), std::abs(b), 1e-12});
}

std::string plain(double value) { return plain_number(value); }

}  // namespace

std::string trajectory_mismatch(const Commitments& claimed, const Commitments& replayed, double tolerance) {
    if (claimed.segments.size() != replayed.segments.size())
        return std::to_string(claimed.segments.size()) + " segments committed, " +
               std::to_string(replayed.segments.size()) + " replayed";
    for (std::size_t i = 0; i < claimed.segments.size(); ++i) {
        const auto& c = claimed.segments[i];
        const auto& r = replayed.segments[i];
        auto where = "the segment ending at step " + std::to_string(r.step) + ": ";
        if (c.step != r.step) return where + "committed as ending at step " + std::to_string(c.step);
        if (!close(c.loss, r.loss, tolerance))
            return where + "loss " + plain(c.loss) + " committed, " + plain(r.loss) + " replayed";
        if (!close(c.norm, r.norm, tolerance))
            return where + "‖θ − θ_0‖ " + plain(c.norm) + " committed, " + plain(r.norm) + " replayed";
        if (!sketches_agree(c.sketch, r.sketch, tolerance, c.norm + r.norm))
            return where + "its sketch lies " +
                   plain(sketch_length(add_sketches(c.sketch, r.sketch, -1.0)) / std::max(c.norm + r.norm, 1e-30)) +
                   " (relative) from the replay's";
    }
    return {};
}

}  // namespace tessera::common
