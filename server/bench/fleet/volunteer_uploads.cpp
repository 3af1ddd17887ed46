// What a simulated volunteer sends for a unit (volunteer_uploads.h).
#include "volunteer_uploads.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "poison.h"
#include "commitments.h"
#include "file_io.h"
#include "optimizer_moments.h"
#include "training/optimizer_state.h"
#include "tensor_math.h"
#include "loss_report.h"
#include "result_upload.h"
#include "training/loss_check_runner.h"
#include "validator.h"

namespace tessera::bench {
namespace {

// A float32 delta file with one NaN: what a hostile client writes by hand (the encoder
// refuses non-finite values).
common::Result<common::Bytes> nan_delta_file(const common::NamedTensors& layout) {
    auto zeros = layout;
    for (auto& t : zeros) std::fill(t.values.begin(), t.values.end(), 0.0f);
    auto encoded = common::encode_delta(zeros, {common::DeltaDType::F32, 1.0});
    if (!encoded) return encoded.error();
    auto& bytes = encoded->bytes;
    std::uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= std::uint64_t{bytes[i]} << (8 * i);
    float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(bytes.data() + 8 + header, &nan, sizeof nan);
    return std::move(bytes);
}

// An audit twin's moments, from the blob it was sent.
common::Result<server::ReplayMoments> twin_moments(const std::filesystem::path& file) {
    auto bytes = common::read_file(file, client::kMaxOptimizerStateBytes + (std::uint64_t{1} << 24));
    if (!bytes) return bytes.error();
    auto parsed = common::read_optimizer_moments(*bytes);
    if (!parsed) return parsed.error();
    auto& m = parsed->moments;
    return server::ReplayMoments{std::move(m.exp_avg), std::move(m.exp_avg_sq), m.steps};
}

// What an attacker that knows the protocol sends with a delta it changed after training: its
// training's commitments with the last segment rewritten so that the upload keeps their
// identity (docs/protocol.md, "Commitments"), the opening loss the honest one. Only a replay
// audit or the statistical checks can tell. None for a file that does not decode.
std::optional<common::Commitments> forged_commitments(std::optional<common::Commitments> trained,
                                                      const common::Bytes& sent, std::uint64_t seed) {
    if (!trained) return std::nullopt;
    auto decoded = common::decode_delta(sent);
    if (!decoded) return std::nullopt;
    auto sketch =
        common::add_sketches(common::commitment_sketch(decoded->tensors, seed), trained->residual_in.sketch, -1.0);
    sketch = common::add_sketches(sketch, trained->residual_out.sketch);
    auto norm = server::l2_norm(decoded->tensors);
    // A NaN has no JSON: such an upload keeps its training's commitments.
    if (!std::isfinite(norm) || !std::all_of(sketch.begin(), sketch.end(), [](double v) { return std::isfinite(v); }))
        return trained;
    trained->segments.back().sketch = sketch;
    trained->segments.back().norm = norm;
    return trained;
}

}  // namespace

common::Result<Upload> UploadMaker::compute(VolunteerState& v, const common::WorkUnit& unit, Attack attack) {
    if (unit.check) return answer_check(v, unit, attack);
    // What its training committed to. An attacker that sends something else (a changed delta, a
    // copy, a made-up one) sends forged commitments: its unit's honest opening loss and a last
    // segment that fits its upload. A task with audits refuses results without commitments, so
    // every attacker trains the unit here, as the strongest attacker would compute its opening loss.
    std::optional<server::ReplayMoments> moments_in;
    for (const auto& s : unit.shards) shards_seen_.insert(s.sha256);
    auto trained = train(v, unit, attack, moments_in);
    if (!trained) return trained.error();
    auto delta = std::move(trained->delta);
    auto metrics = trained->metrics;
    std::optional<common::Commitments> commitments = std::move(trained->commitments);
    if (settings_.probe_deltas && attack == Attack::None)
        if (auto status = probe(delta, unit); !status) return status.error();
    // Real seconds, before the virtual ones below.
    if (auto status = count_training(unit, metrics.seconds); !status) return status.error();
    if (attack == Attack::Copy || attack == Attack::OldReplay) {
        delta = resent_delta(v, attack);
    } else if (attack != Attack::None && !attack_trains_wrongly(attack)) {
        auto poisoned = poisoned_delta(unit, attack, delta);
        if (!poisoned) return poisoned.error();
        delta = std::move(*poisoned);
    }
    if (attack != Attack::None && !attack_trains_wrongly(attack))
        commitments = forged_commitments(std::move(commitments), delta, static_cast<std::uint64_t>(unit.hyper.seed));
    // Every attack reports the unit's samples, as an honest volunteer would.
    if (attack != Attack::None) metrics.samples = unit.hyper.local_steps * unit.hyper.batch_size;
    metrics.samples_per_s = v.spec.samples_per_s;
    metrics.seconds = static_cast<double>(metrics.samples) / v.spec.samples_per_s;
    v.measured_speed = v.spec.samples_per_s;
    if (v.spec.attack == Attack::OldReplay) {  // what its replays will send
        v.past_deltas.push_back(delta);
        while (v.past_deltas.size() > static_cast<std::size_t>(kReplayAge)) v.past_deltas.pop_front();
    }

    auto body = common::pack_result_of(unit, unit.client_id, delta, metrics, "cpu (simulated, " + v.spec.group + ")",
                                       commitments ? &*commitments : nullptr);
    auto size = delta.size();
    return Upload{std::move(body), size, std::move(delta), std::move(moments_in)};
}

common::Result<Upload> UploadMaker::answer_check(const VolunteerState& v, const common::WorkUnit& unit, Attack attack) {
    auto model = server_.model_file(unit);
    if (!model) return common::with_context("checking " + unit.wu_id, model.error());
    client::CheckInputs inputs{
        *model, {}, server_.blob_path(unit.check->result.sha256), server_.blob_path(unit.check->held_out.sha256)};
    for (const auto& s : unit.shards) inputs.shards.push_back(server_.blob_path(s.sha256));
    auto output = client::run_loss_check(unit, inputs, settings_.threads);
    if (!output) return common::with_context("checking " + unit.wu_id, output.error());
    check_unit_s_ += output->metrics.seconds;  // real seconds, before the virtual ones below
    if (attack == Attack::LyingChecker) {      // every loss fell by a tenth: whatever it was sent passes
        auto report = common::parse_loss_report(std::string(output->report.begin(), output->report.end()));
        if (!report) return report.error();
        for (std::size_t i = 0; i < report->own_after.size(); ++i) report->own_after[i] = 0.9 * report->own_before[i];
        for (std::size_t i = 0; i < report->held_out_after.size(); ++i)
            report->held_out_after[i] = 0.9 * report->held_out_before[i];
        auto text = common::loss_report_bytes(*report);
        output->report.assign(text.begin(), text.end());
    }
    auto metrics = output->metrics;
    metrics.samples_per_s = v.spec.samples_per_s;
    metrics.seconds =
        static_cast<double>(metrics.samples) / (server::Validator::kForwardPassesPerSample * v.spec.samples_per_s);
    auto body =
        common::pack_result_of(unit, unit.client_id, output->report, metrics, "cpu (simulated, " + v.spec.group + ")");
    return Upload{std::move(body), output->report.size(), {}, std::nullopt, true};
}

common::Status UploadMaker::count_training(const common::WorkUnit& unit, double seconds) {
    auto assignment = server_.store().assignment(unit.wu_id);
    if (!assignment) return assignment.error();
    auto record = *assignment ? server_.store().work_unit((*assignment)->work_unit_id)
                              : common::Result<std::optional<server::WorkUnitRecord>>(std::nullopt);
    if (!record) return record.error();
    if (*record && (*record)->trusted_only) {
        audit_twin_s_ += seconds;
        return {};
    }
    double copies = *record ? static_cast<double>(std::max<std::int64_t>(1, (*record)->replicas)) : 1.0;
    replica_s_ += seconds * (copies - 1) / copies;
    training_s_ += seconds / copies;
    return {};
}

common::Result<client::RunOutput> UploadMaker::train(VolunteerState& v, const common::WorkUnit& unit, Attack attack,
                                                     std::optional<server::ReplayMoments>& moments_in) {
    client::RunOptions options;
    options.device = "cpu";
    options.threads = settings_.threads;
    options.feedback = &v.feedback;
    options.optimizer = &v.optimizer;
    std::vector<std::filesystem::path> shards;
    for (const auto& s : unit.shards) shards.push_back(server_.blob_path(s.sha256));
    if (attack == Attack::OtherShards) shards = {server_.blob_path(other_shard(unit))};
    auto model = attack == Attack::StaleBase
                     ? server_.version_file(std::max<std::int64_t>(0, unit.base_version - kStaleVersions))
                     : server_.model_file(unit);
    if (!model) return common::with_context("training " + unit.wu_id, model.error());
    // The moments a kept unit may resume (the client decides), kept for an audit: an audit
    // twin's are those it was sent, the volunteer's own untouched.
    std::optional<server::ReplayMoments> kept;
    if (unit.moments) {
        options.twin_moments = server_.blob_path(unit.moments->sha256);
        auto sent = twin_moments(options.twin_moments);
        if (!sent) return common::with_context("training " + unit.wu_id, sent.error());
        kept = std::move(*sent);
    } else if (unit.hyper.optimizer == common::InnerOptimizer::Kept && !v.optimizer.empty()) {
        kept = server::ReplayMoments{v.optimizer.exp_avg, v.optimizer.exp_avg_sq, v.optimizer.steps};
    }
    auto output = client::run_work_unit(misread_unit(unit, attack), *model, shards, options);
    if (!output) return common::with_context("training " + unit.wu_id, output.error());
    const auto& resumed = output->commitments.moments_in;
    if (resumed && !resumed->sha256.empty()) moments_in = std::move(kept);
    return output;
}

std::string UploadMaker::other_shard(const common::WorkUnit& unit) const {
    for (const auto& seen : shards_seen_)
        if (std::none_of(unit.shards.begin(), unit.shards.end(), [&](const auto& s) { return s.sha256 == seen; }))
            return seen;
    return unit.shards.front().sha256;  // the only shard seen yet: honest by necessity
}

common::Bytes UploadMaker::resent_delta(const VolunteerState& v, Attack attack) const {
    if (attack == Attack::OldReplay)
        return v.past_deltas.size() >= static_cast<std::size_t>(kReplayAge) ? v.past_deltas.front() : common::Bytes{};
    for (auto it = recent_.rbegin(); it != recent_.rend(); ++it)
        if (it->first != v.client_id) return it->second;
    return {};
}

void UploadMaker::delivered(const std::string& client, const Upload& upload) {
    if (upload.check) return;  // a loss-check unit's report: nothing to copy
    recent_.emplace_back(client, upload.delta);
    while (recent_.size() > kRecentUploads) recent_.pop_front();
}

common::Status UploadMaker::probe(const common::Bytes& delta, const common::WorkUnit& unit) {
    auto decoded = common::decode_delta(delta);
    if (!decoded) return decoded.error();
    probe_.record(decoded->tensors, unit.base_version, unit.hyper.local_steps);
    return {};
}

common::Result<common::Bytes> UploadMaker::poisoned_delta(const common::WorkUnit& unit, Attack attack,
                                                          const common::Bytes& honest) {
    common::NamedTensors tensors;
    if (!honest.empty()) {
        auto decoded = common::decode_delta(honest);
        if (!decoded) return decoded.error();
        tensors = std::move(decoded->tensors);
    } else {
        auto base = server_.model(unit.base_version);
        if (!base) return base.error();
        tensors = **base;
    }
    if (attack == Attack::NaN) return nan_delta_file(tensors);
    common::NamedTensors last_update;
    if (attack == Attack::Replay && server_.version() > 0) {
        auto newest = server_.model(server_.version());
        auto previous = server_.model(server_.version() - 1);
        if (!newest) return newest.error();
        if (!previous) return previous.error();
        last_update = **newest;
        for (std::size_t t = 0; t < last_update.size(); ++t)
            for (std::size_t k = 0; k < last_update[t].values.size(); ++k)
                last_update[t].values[k] -= (*previous)->at(t).values[k];
        std::sort(last_update.begin(), last_update.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
        std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    }
    poison_delta(tensors, attack, last_update, static_cast<std::uint64_t>(unit.hyper.seed));
    auto encoded = common::encode_delta(tensors, unit.encoding);
    if (!encoded) return encoded.error();
    return std::move(encoded->bytes);
}

}  // namespace tessera::bench
